// Obsidian's additions to the DOM (createEl, createDiv, empty, setText, addClass, …), which the
// app defines on HTMLElement's prototype before any plugin loads. Installed on whatever DOM the
// stub runs in: jsdom in the tests, Chromium for the screenshot.
/* eslint-disable @typescript-eslint/no-explicit-any */

interface Info {
  cls?: string | string[];
  text?: string | DocumentFragment;
  attr?: Record<string, string | number | boolean | null>;
  title?: string;
  type?: string;
  value?: string;
  placeholder?: string;
  href?: string;
  parent?: Node;
  prepend?: boolean;
}

function make(this: Node | null, tag: string, o?: Info | string, cb?: (el: HTMLElement) => void): HTMLElement {
  const info: Info = typeof o === "string" ? { cls: o } : o || {};
  const el = document.createElement(tag);
  if (info.cls) el.className = Array.isArray(info.cls) ? info.cls.join(" ") : info.cls;
  if (info.text !== undefined) {
    if (typeof info.text === "string") el.textContent = info.text;
    else el.appendChild(info.text);
  }
  for (const [k, v] of Object.entries(info.attr || {})) {
    if (v === null || v === false) continue;
    el.setAttribute(k, v === true ? "" : String(v));
  }
  if (info.title !== undefined) el.title = info.title;
  if (info.type !== undefined) el.setAttribute("type", info.type);
  if (info.value !== undefined) (el as HTMLInputElement).value = info.value;
  if (info.placeholder !== undefined) el.setAttribute("placeholder", info.placeholder);
  if (info.href !== undefined) el.setAttribute("href", info.href);
  const parent = info.parent || this;
  if (parent) {
    if (info.prepend) parent.insertBefore(el, parent.firstChild);
    else parent.appendChild(el);
  }
  cb?.(el);
  return el;
}

export function installDom(win: any = globalThis): void {
  const E = win.HTMLElement.prototype;
  const N = win.Node.prototype;
  if (E.createEl) return;
  E.createEl = function (tag: string, o?: Info, cb?: any) { return make.call(this, tag, o, cb); };
  E.createDiv = function (o?: Info, cb?: any) { return make.call(this, "div", o, cb); };
  E.createSpan = function (o?: Info, cb?: any) { return make.call(this, "span", o, cb); };
  win.DocumentFragment.prototype.createEl = E.createEl;
  win.DocumentFragment.prototype.createDiv = E.createDiv;
  win.DocumentFragment.prototype.createSpan = E.createSpan;
  N.empty = function () { while (this.firstChild) this.removeChild(this.firstChild); };
  N.appendText = function (t: string) { this.appendChild(win.document.createTextNode(t)); };
  E.setText = function (t: string | DocumentFragment) {
    this.empty();
    if (typeof t === "string") this.textContent = t; else this.appendChild(t);
  };
  E.addClass = function (...c: string[]) { this.classList.add(...c); };
  E.addClasses = function (c: string[]) { this.classList.add(...c); };
  E.removeClass = function (...c: string[]) { this.classList.remove(...c); };
  E.toggleClass = function (c: string | string[], on: boolean) {
    for (const x of Array.isArray(c) ? c : [c]) this.classList.toggle(x, on);
  };
  E.hasClass = function (c: string) { return this.classList.contains(c); };
  E.setAttr = function (k: string, v: string | number | boolean | null) {
    if (v === null) this.removeAttribute(k); else this.setAttribute(k, String(v));
  };
  E.setAttrs = function (o: Record<string, any>) { for (const [k, v] of Object.entries(o)) this.setAttr(k, v); };
  E.show = function () { this.style.display = ""; };
  E.hide = function () { this.style.display = "none"; };
  win.createEl = (tag: string, o?: Info, cb?: any) => make.call(null, tag, o, cb);
  win.createDiv = (o?: Info, cb?: any) => make.call(null, "div", o, cb);
  win.createSpan = (o?: Info, cb?: any) => make.call(null, "span", o, cb);
  win.createFragment = (cb?: (f: DocumentFragment) => void) => {
    const f = win.document.createDocumentFragment();
    cb?.(f);
    return f;
  };
}
