"""What an agent may learn about a property value (issue #47): a value it is shown redacted is
never matched, suggested, ranged or audited in clear, and a value is judged with its key
(``wifi_password: CorrectHorse42`` is a password although ``CorrectHorse42`` alone is a word),
on both stores and through every door."""
import json

import anyio
import pytest
from conftest import store_settings
from helpers import indexed_vault
from mcp import Client

from hybrid.faces.mcp import build_server
from hybrid.retrieval.filters import NoMatchingNotes
from hybrid.store.agent.redact import REDACTED, redactor
from hybrid.store.agent.values import hides_value

SECRETS = ("CorrectHorse42", "Tr0ub4dor&3", "12345678")
NOTES = {
    "home/wifi.md": "---\nwifi_password: CorrectHorse42\ndb_pass: Tr0ub4dor&3\npasscode: 12345678\n"
                    "rating: 4\nstatus: done\n---\n# Home wifi\n\nThe router is in the hall.\n",
    "home/garden.md": "---\nrating: 2\nstatus: open\n---\n# Garden\n\nThe beds need compost.\n",
    # values YAML reads otherwise than written, and values of common words (adversarial re-test)
    "home/alarm.md": "---\npin: 0420\ndoor_passcode: 0755\nalarm_pin: 0x1F4\ndb_password: yes\nkennwort: Off\n"
                     "guest_password: to be or not to be\nrouter_password: 3.14159\ngate_password: Correct\n"
                     "  Horse99\nAKIA2OGYBAH6TYQ5ZXMN: laptop key\nzone: garage\n---\n# Alarm\n\nThe alarm panel.\n",
}
# keys the third re-test of issue #47 found unrecognised: leet, a German compound, a pair, a
# word that names a code only sometimes (its value then has a digit), a key of many words
KEYED = {"p4ssw0rd": "Zq7Leet0004", "WLAN-Schlüssel": "Sonnenblume", "credentials": "admin:Zq7Colon0032",
         "door": "4821", "key": "Zq7Leet0006", "codeword": "bluebird",
         "the_wifi_password_for_the_guest_network_in_the_summer_house_by_the_lake_2024": "Zq7Long0009"}
# keys no rule names (sixth re-test of issue #47): a value one note alone holds is never
# suggested or ranged to an agent, while a value notes share (a status) still is
NOTES["home/lockbox.md"] = ("---\nlockbox: 4821\nnas: admin/Tr0ub4dor\nseed: abandon ability able about\n"
                            "status: boxed\n---\n# Lockbox\n\nThe box.\n")
NOTES["home/shed.md"] = "---\nlockbox: 1111\nstatus: boxed\n---\n# Shed\n\nThe shed.\n"
NOTES["home/house.md"] = ("---\n" + "".join(f"{k}: {v}\n" for k, v in KEYED.items())
                          + "song_key: C major\n---\n# House\n\nThe house notes.\n")
# YAML forms a line-by-line reading misses (second re-test of issue #47): the value on the next
# line, an anchor's value under another key, a key that is an alias, a complex key, a multi-line
# value after it
FORMS = {
    "forms/next_line.md": "wifi_password:\n  CorrectHorse45",
    "forms/anchor.md": "shared: &pw CorrectHorse43\nwifi_password: *pw",
    "forms/alias_key.md": "label: &k db_password\n*k : Tr0ub4dorX",
    "forms/complex_ml.md": "? wifi_password\n: CorrectHorse44\ngate_password: Correct\n  Horse99",
    "forms/flow_next.md": "creds: {wifi_password:\n    CorrectHorse46}",
    "forms/flow_quoted.md": 'creds: {"wifi_password":\n  "CorrectHorse47"}',
    "forms/flow_cut.md": "creds: {wifi_password: Correct\n  Horse48}",
    "forms/nested_next.md": "router:\n  admin_password:\n    CorrectHorse49",
    "forms/anchor_list.md": "vals: [&p CorrectHorse50, 2]\npasscode: *p",
}
FORM_SECRETS = ("CorrectHorse45", "CorrectHorse43", "Tr0ub4dorX", "CorrectHorse44", "Horse99", "CorrectHorse46",
                "CorrectHorse47", "Horse48", "CorrectHorse49", "CorrectHorse50")
NOTES.update({path: f"---\n{fm}\n---\n# {path}\n\nThe form body.\n" for path, fm in FORMS.items()})
ALARM = ("420", "0420", "272", "0755", "493", "0x1F4", "500", "to be or not to be", "3.14159", "Horse99",
         "AKIA2OGYBAH6TYQ5ZXMN", "akia2ogybah6tyq5zxmn")


@pytest.fixture(scope="module")
def h(tmp_path_factory, new_store):
    handle = indexed_vault(tmp_path_factory.mktemp("propsecrets"), NOTES, **store_settings(new_store()))
    yield handle
    handle.close()


def no_secret_in(text: str) -> bool:
    return not any(s in text for s in SECRETS)


@pytest.mark.parametrize("query", ["prop:wifi_password=x", "prop:db_pass=Tr0", "passcode<0", "passcode>=99999999",
                                   "wifi_password:correcthors", "prop:db_pass=Tr0ub4dor"])
def test_no_hint_names_or_ranges_a_secret_value(h, query):
    with pytest.raises(NoMatchingNotes) as exc:
        h.search(query, agent=True)
    assert no_secret_in(str(exc.value)), str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("query", ["prop:wifi_password=CorrectHorse42", "prop:db_pass=Tr0ub4dor&3",
                                   "prop:passcode=12345678", "passcode>=1", "passcode<99999999"])
def test_a_guess_of_a_secret_value_is_never_confirmed(h, query):
    assert [x.path for x in h.search(query, mode="lexical")] == ["home/wifi.md"]  # the owner's
    with pytest.raises(NoMatchingNotes) as exc:
        h.search(query, agent=True)
    assert no_secret_in(str(exc.value))
    assert [x.path for x in h.search("router", agent=True, props=["rating>=4"], mode="lexical")] == ["home/wifi.md"]
    assert [x.path for x in h.search("status:done", agent=True)] == ["home/wifi.md"]  # its other properties


def test_the_owner_still_hears_of_the_values(h):
    with pytest.raises(NoMatchingNotes, match="CorrectHorse42"):
        h.search("prop:wifi_password=x")
    with pytest.raises(NoMatchingNotes, match="run from 12345678 to 12345678"):
        h.search("passcode<0")


def test_what_is_matched_is_what_get_note_shows(h):
    text = h.get("home/wifi.md", agent=True).text
    assert no_secret_in(text)
    for key in ("wifi_password", "db_pass", "passcode"):
        assert f"{key}: {REDACTED}" in text
    assert "rating: 4" in text and "status: done" in text  # values that are no secret are shown
    assert "CorrectHorse42" in h.get("home/wifi.md").text


def test_mcp_and_the_api_answer_the_same_and_the_audit_holds_no_secret(h):
    from hybrid.faces.http import api_search_call

    async def mcp():
        async with Client(build_server(h)) as c:
            a = await c.call_tool("search", {"query": "router", "props": ["db_pass=Tr0"]})
            b = await c.call_tool("search", {"query": "router", "props": ["wifi_password=CorrectHorse42"]})
            return a, b
    a, b = anyio.run(mcp)
    assert a.is_error and b.is_error
    assert no_secret_in(a.content[0].text)
    status, data = api_search_call(h, json.dumps({"query": "router", "props": ["passcode<0"]}).encode(), "test")
    assert status == 422 and no_secret_in(data["error"])
    status, data = api_search_call(h, json.dumps({"query": "router", "props": ["passcode=12345678"]}).encode(),
                                   "test")
    assert status == 422 and data.get("notes", []) == []
    audit = (h.config.data / "audit.jsonl").read_text()
    assert "passcode" in audit and "wifi_password" in audit  # the calls are recorded…
    assert no_secret_in(audit), audit  # …the guesses and hints are not, in clear


@pytest.mark.parametrize("key, value, hidden", [
    ("wifi_password", "CorrectHorse42", True),   # a word alone, a password by its key
    ("db_pass", "Tr0ub4dor&3", True),
    ("passcode", "12345678", True),              # digits after a password key
    ("Passwort", "Sonnenblume7", True),
    ("пароль", "qwerty123", True),
    ("api_key", "3f2a9c0d8e7b6a5f4e3d2c1b", True),
    ("url", "https://example.org/hook?sig=Zq7vLk2pXr9wQ3mN8bV5", True),  # a secret in the value alone
    ("status", "done", False),
    ("rating", "4", False),
    ("password", "see 1Password", True),        # a field, not prose: every value under the key
    ("password", "changeme", True),
    ("pin", "0420", True),
    ("db_password", "True", True),               # `yes` as YAML reads it
    ("guest_password", "to be or not to be", True),
    ("door_passcode", "12:34", True),
    ("password_hint", "the dog", True),          # a password word anywhere in the key: fail closed
    ("password_wifi", "CorrectHorse42", True),
    ("dbPass", "Tr0ub4dorX", True),
    ("p@ssword", "CorrectHorse45", True),
    ("admin_password_old", "Winter2024x", True),
    ("puk", "12345678", True),
    ("door_code", "4711", True),
    ("recovery_codes", "abcd-efgh", True),
    ("parool", "Sala123", True),                  # Estonian
    ("lykilorð", "Leyni99", True),               # Icelandic
    # the third re-test's keys (issue #47): leet, compounds, other languages, words for codes
    ("p4ssw0rd", "Zq7Leet0004", True),
    ("4pik3y", "Zq7Leet0005", True),
    ("WLAN-Schlüssel", "Sonnenblume", True),
    ("wifi_key", "sunflower", True),
    ("netzwerkschlüssel", "Sonnenblume", True),
    ("ключ_wifi", "подсолнух", True),
    ("credentials", "admin:Zq7Colon0032", True),
    ("Zugangsdaten", "admin hunter", True),
    ("codeword", "bluebird", True),
    ("code_word", "bluebird", True),
    ("lock combo", "12-34-56", True),
    ("cvv", "123", True),
    ("alarmcode", "7391", True),
    ("keycode", "7391", True),
    ("the_wifi_password_for_the_guest_network_in_the_summer_house_by_the_lake_2024_edition",
     "CorrectHorse42", True),                   # a long key is judged all the same
    # a word that names a code or key only sometimes: a value with a digit (a code), or a pair
    ("safe", "12-34-56", True),
    ("door", "4821", True),
    ("front_door", "4821#", True),
    ("login", "admin/Zq7Colon0032", True),
    ("login", "admin:hunter", True),
    ("key", "Zq7Leet0004", True),
    ("ключ", "Zq7Leet0006", True),
    # the fourth re-test's keys (issue #47): glued words, CJK compounds, plurals, look-alikes
    *[(k, "sunshine7", True) for k in (
        "WiFi密码", "邮箱密码", "wifipassword", "WLANPasswort", "пин-код", "ПИН-код", "Wi-Fiパスワード", "adminpass",
        "网络密码", "登录密码", "メールパスワード", "PIN码", "PINコード", "masterpassword", "dbpassword", "rootpw",
        "Routerpasswort", "Hauptkennwort", "Passwörter", "Kennwörter", "Geheimnummer", "Tresorcode",
        "Zahlenschloss", "Kartenprüfnummer", "wachtwoorden", "mots de passe", "hesla", "jelszava",
        "wifi şifresi", "motdepasse", "парольwifi", "2fa", "security answer", "password🔑", "🔑", "🔐",
        "p\u0430ssword", "ｐａｓｓｗｏｒｄ", "Pässwort", "hasło_do_wifi", "ssh key", "Sicherheitsfrage",
        # the fifth re-test's
        "пин", "ПИН", "パスコード", "PIN번호", "비번", "pswd", "p/w", "P/W", "पिन", "핀번호", "psw", "pword",
        "pin#", "mypin", "atmpin", "debitpin", "visapin", "kata laluan", "katalaluan", "Geheimcode",
        "user+pass", "pass\u200bword", "pass\u00adword", "código wifi", "wifi code")],
    ("padlock", "4821", True),
    ("cadenas", "4821", True),
    ("schloss", "4821", True),
    ("caja fuerte", "12-34-56", True),
    ("код", "4821", True),                       # words for a code, a safe, a lock: a code-like value
    ("keypad", "4821", True),
    ("tresor", "12-34-56", True),
    ("coffre", "4821", True),
    ("candado", "4821", True),
    ("auth", "alice:hunter22", True),
    ("account", "alice:hunter22", True),
    ("basic auth", "alice:hunter22", True),
    ("zip code", "10115", False),                # a code that names a place or a status
    ("postal code", "10115", False),
    ("area code", "030", False),
    ("status_code", "404", False),
    ("key date", "2024-05-01", False),
    ("key result", "ship 3 features", False),
    ("login shell", "/bin/zsh", False),
    ("account", "alice", False),
    ("key", "C major", False),                  # a song's key, a login name, a yes or no
    ("login", "alice", False),
    ("safe", "true", False),
    ("primary_key", "id", False),
    ("passport", "X1234567", False),
    ("keyboard", "ISO", False),
    ("compass", "north", False),
    ("private", "true", False),
])
def test_a_value_is_judged_with_its_key(key, value, hidden):
    assert hides_value(redactor(), key, value) is hidden


def test_an_agents_hit_carries_no_secret_from_its_notes_properties(tmp_path):
    """A bookmark's address is a property its hit carries (``url``, ``uri``): a secret in it is
    redacted for agents as the note's text is."""
    from helpers import write

    import hybrid
    sig = "Zq7vLk2pXr9wQ3mN8bV5Xk9mP2vL7qZ"
    export = write(tmp_path, "bookmarks.html", '<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n'
                   f'<DT><A HREF="https://hooks.example.org/run?token={sig}" ADD_DATE="1710000000">Deploy hook</A>\n'
                   '<DT><A HREF="https://example.org/bread" ADD_DATE="1710000000">Bread guide</A>\n</DL><p>\n')
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    try:
        h.add_source("bookmarks", export, "reading")
        h.index()
        owner = h.search("deploy hook", mode="lexical")[0]
        assert sig in owner.url
        hit = h.search("deploy hook", mode="lexical", agent=True)[0]
        assert hit.title == "Deploy hook" and sig not in hit.url and sig not in hit.uri
        assert REDACTED in hit.url
        assert h.search("bread guide", mode="lexical", agent=True)[0].url == "https://example.org/bread"
    finally:
        h.close()


@pytest.mark.parametrize("key", sorted(KEYED))
def test_the_third_retests_keys_tell_an_agent_nothing(h, key):
    """A wrong guess is told no value, a right one is answered like it, and ``get_note`` and the
    audit log show the value redacted (each leaked before the third re-test of issue #47)."""
    value = KEYED[key]
    said = []
    for guess in ("Wrong1", value):
        with pytest.raises(NoMatchingNotes) as exc:
            h.search("house", agent=True, props=[f"{key}={guess}"], mode="lexical")
        said.append(str(exc.value).replace(guess, "GUESS"))
    assert said[0] == said[1] and value not in said[0]
    text = h.get("home/house.md", agent=True).text
    assert value not in text and "song_key: C major" in text
    from hybrid.faces.http import api_search_call  # an audited call of its own: no other test's log
    status, _ = api_search_call(h, json.dumps({"query": "house", "props": [f"{key}={value}"]}).encode(), "t")
    audit = (h.config.data / "audit.jsonl").read_text()
    last = json.loads(audit.splitlines()[-1])
    assert status == 422 and last["args"]["props"] == [f"{key.lower()}:[redacted secret]"] and value not in audit


@pytest.mark.parametrize("query", ["prop:lockbox=1234", "lockbox<0", "lockbox>99999", "prop:nas=admin",
                                   "prop:seed=abandon", "prop:seed=x"])
def test_a_value_one_note_holds_is_never_hinted_or_ranged_to_an_agent(h, query):
    props = [query[5:]] if query.startswith("prop:") else []
    with pytest.raises(NoMatchingNotes) as exc:
        h.search("box" if props else f"box {query}", agent=True, mode="lexical", props=props)
    said = str(exc.value)
    assert not any(x in said for x in ("4821", "1111", "Tr0ub4dor", "ability")), said
    with pytest.raises(NoMatchingNotes) as owner:  # the owner is told as before
        h.search("box", mode="lexical", props=["lockbox=1234"])
    assert "4821" in str(owner.value) and "1111" in str(owner.value)


def test_a_value_notes_share_is_still_suggested_to_an_agent(h):
    with pytest.raises(NoMatchingNotes) as exc:
        h.search("box", agent=True, mode="lexical", props=["status=boxe"])
    assert "boxed" in str(exc.value)


@pytest.mark.parametrize("query", ["pin>9999", "pin:272", "pin:420", "door_passcode<0", "alarm_pin>1000",
                                   "db_password:false", "db_password:true", "kennwort:off",
                                   "router_password>3", "prop:AKIA2OGYBAH6=x", "prop:akia2ogybah6tyq5zxmn=x"])
def test_values_yaml_reads_otherwise_and_secret_keys_tell_nothing(h, query):
    """A number in another base (``pin: 0420`` is 272 to the parser), a YAML boolean and a key
    that is itself a secret are judged as written: never matched, ranged or suggested."""
    with pytest.raises(NoMatchingNotes) as exc:
        h.search(query, agent=True)
    said = str(exc.value)
    if query.startswith("prop:akia"):  # a right guess of a secret key reads as a wrong one
        assert said == "no note has property 'akia2ogybah6tyq5zxmn'"
        return
    assert not any(x in said for x in ALARM) and "True" not in said and "False" not in said, said


def test_get_note_shows_no_value_under_a_credential_key(h):
    text = h.get("home/alarm.md", agent=True).text
    assert not any(x in text for x in ALARM) and "db_password: yes" not in text, text
    assert "zone: garage" in text and "The alarm panel." in text


@pytest.mark.parametrize("path", sorted(FORMS))
def test_no_yaml_form_shows_a_credential_value(h, path):
    text = h.get(path, agent=True).text
    assert not any(x in text for x in FORM_SECRETS), text
    assert "The form body." in text


@pytest.mark.parametrize("query", ["prop:shared=CorrectHorse43", "prop:shared=x", "prop:label=x"])
def test_a_value_hidden_under_one_key_is_hidden_under_every_key(h, query):
    """``shared: &pw X`` / ``wifi_password: *pw``: X is a password, under ``shared`` too."""
    with pytest.raises(NoMatchingNotes) as exc:
        h.search(query, agent=True)
    assert not any(x in str(exc.value) for x in FORM_SECRETS), str(exc.value)


def test_a_right_guess_through_another_key_is_not_audited_in_clear(h):
    """``prop:shared=X`` where X is a password by an anchor: the answer is a wrong guess's, and
    the audit log keeps the value redacted, as it does a guess under the password's own key."""
    from hybrid.faces.http import api_search_call
    for value in ("CorrectHorse43", "Wrong-guess-7"):
        status, data = api_search_call(h, json.dumps({"query": "form", "props": [f"shared={value}"]}).encode(), "t")
        assert status == 422 and value not in data["error"]
    audit = (h.config.data / "audit.jsonl").read_text()
    assert "shared" in audit and "CorrectHorse43" not in audit and "Wrong-guess-7" not in audit


def test_a_refused_comparison_on_a_secret_key_is_audited_redacted(h):
    """``wifi_password>=CorrectHorse42`` in ``props`` is refused (no number or date): the refusal
    quotes it, and the audit log kept it in clear, args and error (second re-test of #47)."""
    from hybrid.faces.http import api_search_call
    status, _ = api_search_call(h, json.dumps({"query": "router", "props": ["wifi_password>=CorrectHorse42"]}).encode(),
                                "t")
    assert status == 400
    assert "CorrectHorse42" not in (h.config.data / "audit.jsonl").read_text()
