"""``hybrid config``: show and change the settings in the config file. Every value is read by its
setting's type and checked by the settings table (hybrid.core.settings), written under the lock
`hybrid vault add` takes (Config.edit), into the file as it stands: comments and formatting are
kept. A change that asks something of the indexes says what (the table's ``reindex``)."""

from __future__ import annotations

from typing import Any

import click

from hybrid.core import setting_text as text
from hybrid.core.config import ADDS_TO_SETTING, VAULT_SETTINGS, Config, check_vault_key, load_config
from hybrid.core.settings import NAMES, Settings
from hybrid.faces.cli.complete import complete_setting, complete_value, complete_vault
from hybrid.faces.cli.support import Group, confirm_destinations, print_json, yes_option

VAULT_OPTION = click.option("--vault", metavar="NAME", shell_complete=complete_vault,
                            help="The table of vault NAME (its own include, exclude, embedder, "
                                 "agent_exclude, store) instead of [settings].")


@click.group("config", cls=Group)
def config_cmd() -> None:
    """Show and change settings in the config file (checked; its comments and formatting kept).

    \b
    hybrid config list                   every setting, its value and where it comes from
    hybrid config get chunk_tokens
    hybrid config set exclude "archive/**, drafts/**" --vault notes
    hybrid config unset rrf_k            back to the default
    """


def _row(cfg: Config, name: str, vault: str | None) -> dict[str, Any]:
    """Setting ``name`` as it applies: to every vault, or (``vault``) to that vault."""
    defaults = Settings().as_dict()
    value = cfg.settings.as_dict()[name]
    row: dict[str, Any] = {"key": name, "value": value,
                           "source": "config" if name in cfg.file_keys else "default",
                           "default": defaults[name]}
    if vault is None:
        own = {v: raw[name] for v, raw in sorted(cfg.vaults.items()) if name in raw}
        if own:
            row["vaults"] = own
        return row
    raw = cfg.vaults[cfg.vault(vault).name]
    row["vault"] = vault
    if name == "store":  # a vault keeps the store it was registered with; the setting is for new ones
        row.update(value=raw.get("store", ""), source="vault")
    elif name in VAULT_SETTINGS and _own(raw, name):
        mine = list(raw[name]) if isinstance(raw[name], list) else raw[name]
        row.update(value=list(value) + mine if name in ADDS_TO_SETTING else mine, source="vault")
    return row


def _source_words(row: dict[str, Any]) -> str:
    words = {"default": "default", "config": "config file", "vault": f"vault {row.get('vault')}"}[row["source"]]
    if row["source"] == "vault" and row["key"] in ADDS_TO_SETTING:
        words += " (added to the setting's)"
    for v, own in row.get("vaults", {}).items():
        verb = "adds" if row["key"] in ADDS_TO_SETTING else "has"
        words += f"; vault {v} {verb} {text.show(own)}"
    return words


@config_cmd.command("list")
@VAULT_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON: key, value, source (default, config "
                                                       "or vault), default, and vaults' own values.")
def list_cmd(vault: str | None, as_json: bool) -> None:
    """Every setting with its value and where it comes from: the default, the config file, or
    a vault's table (--vault NAME: the values that vault uses)."""
    cfg = load_config()
    rows = [_row(cfg, name, vault) for name in NAMES]
    if as_json:
        print_json(rows)
        return
    click.echo(f"# {cfg.path}")
    shown = [(f"{r['key']} = {text.show(r['value'])}", _source_words(r)) for r in rows]
    width = min(60, max(len(s) for s, _ in shown))
    for setting, source in shown:
        click.echo(f"{setting:<{width}}  # {source}")


@config_cmd.command("get")
@click.argument("key", shell_complete=complete_setting)
@VAULT_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the value as JSON.")
def get_cmd(key: str, vault: str | None, as_json: bool) -> None:
    """Print setting KEY's value (as TOML writes it; --vault NAME: as that vault uses it)."""
    row = _row(load_config(), text.check_name(key), vault)
    if as_json:
        print_json(row["value"])
    else:
        click.echo(text.show(row["value"]))


def _affected(cfg: Config, name: str, vault: str | None) -> list[str]:
    """The vaults a change of ``name`` reaches: ``vault``, or those without their own value."""
    if vault is not None:
        return [vault]
    if name == "store":
        return []
    return [v for v, raw in sorted(cfg.vaults.items())
            if name not in VAULT_SETTINGS or name in ADDS_TO_SETTING or not _own(raw, name)]


def _own(raw: dict, name: str) -> bool:
    """Whether a vault's table sets ``name`` itself (``false`` counts: ``ocr = false``; an empty
    list or text does not)."""
    value = raw.get(name)
    return value is not None and value != [] and value != ""


def _report(cfg: Config, name: str, vault: str | None, done: str, changed: bool) -> None:
    click.echo(done, err=True)
    if not changed:
        return
    if vault is not None and name == "store":
        where = cfg.vaults[vault].get("store") or "local files"
        click.echo(f"note: vault {vault} now keeps its index in {where}: `hybrid index --vault {vault}` "
                   f"builds it there (the index kept before is not moved)", err=True)
        return
    vaults = _affected(cfg, name, vault)
    note = text.reindex_note(name, vaults, every=vault is None and len(vaults) == len(cfg.vaults))
    if note:
        click.echo(f"note: {note}", err=True)


@config_cmd.command("set", context_settings={"ignore_unknown_options": True})  # `set rrf_k -1`
@click.argument("key", shell_complete=complete_setting)
@click.argument("value", shell_complete=complete_value)
@VAULT_OPTION
@yes_option
def set_cmd(key: str, value: str, vault: str | None, yes: bool) -> None:
    """Set KEY to VALUE in the config file: true/false (yes/no, on/off) for a switch, a number,
    a list as a TOML or JSON array or comma-separated words ("" for none), or text. The value
    is checked before anything is written."""
    name = text.check_name(key)
    if vault is not None:
        check_vault_key(name)
    parsed = text.parse(name, value)
    cfg = load_config()
    with cfg.edit() as fresh:
        before = _row(fresh, name, vault)
        if vault is None:
            held = name in fresh.file_keys
            fresh.set_setting(name, parsed)
            written = fresh.settings.as_dict()[name]
        else:
            held = name in fresh.vaults[fresh.vault(vault).name]
            fresh.set_vault_key(vault, name, parsed)
            written = fresh.vaults[vault][name]
        after = _row(fresh, name, vault)
    table = f"vault {vault}'s table" if vault else "[settings]"
    was = "" if held and before["value"] == after["value"] else \
        f" (was {text.show(before['value'])}{', the default' if before['source'] == 'default' else ''})"
    _report(cfg, name, vault, f"set {name} = {text.show(written)} in {table} of {cfg.path}{was}",
            before["value"] != after["value"])
    _confirm_servers(fresh, _affected(fresh, name, vault), yes)


def _confirm_servers(cfg: Config, vaults: list[str], yes: bool) -> None:
    """Choosing a model on another machine asks for the user's yes once (or takes ``--yes``);
    declined or not asked, nothing is sent until it is given (hybrid.app.remote)."""
    from hybrid.app import remote
    found = [d for v in vaults for d in remote.vault_destinations(cfg, cfg.vault(v))]
    confirm_destinations(cfg, found, yes=yes, refuse=False)


@config_cmd.command("unset")
@click.argument("key", shell_complete=complete_setting)
@VAULT_OPTION
def unset_cmd(key: str, vault: str | None) -> None:
    """Remove KEY from the config file ([settings], or --vault NAME's table): the default (or,
    for a vault, the setting) applies again."""
    name = text.check_name(key)
    if vault is not None:
        check_vault_key(name)
    cfg = load_config()
    with cfg.edit() as fresh:
        before = _row(fresh, name, vault)
        held = fresh.unset_vault_key(vault, name) if vault else fresh.unset_setting(name)
        after = _row(fresh, name, vault)
    table = f"vault {vault}'s table" if vault else "[settings]"
    now = f"{text.show(after['value'])}" + (", the default" if after["source"] == "default" else "")
    done = (f"unset {name} in {table} of {cfg.path} (now {now})" if held else
            f"{name} was not set in {table} of {cfg.path}: nothing changed (it is {now})")
    _report(cfg, name, vault, done, before["value"] != after["value"])
