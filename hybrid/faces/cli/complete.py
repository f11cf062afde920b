"""Shell completion (click's own, for bash, zsh and fish): `hybrid completion SHELL` prints the
script, and the callbacks below complete vault names, setting names and a setting's allowed
values. They read the config file and nothing else: no model, no index, no store is opened
while a shell waits for a Tab."""

from __future__ import annotations

import click
from click.shell_completion import CompletionItem

PROG = "hybrid"
COMPLETE_VAR = "_HYBRID_COMPLETE"  # what click's scripts set to ask the `hybrid` command
SHELLS = ("bash", "zsh", "fish")


def vault_names() -> list[str]:
    """The registered vaults' names, read straight from the config file ([] when it is missing
    or unreadable: a completion never fails loudly)."""
    import tomllib

    from hybrid.core.config import config_path
    try:
        with open(config_path(), "rb") as fh:
            vaults = tomllib.load(fh).get("vaults")
    except (OSError, ValueError):
        return []
    return sorted(str(n) for n in vaults) if isinstance(vaults, dict) else []


def complete_vault(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(n) for n in vault_names() if n.startswith(incomplete)]


def complete_setting(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Setting names (with --vault given: those a vault's table may hold), each with its help's
    first sentence for the shells that show one."""
    from hybrid.core import setting_text
    from hybrid.core.config import VAULT_SETTINGS
    from hybrid.core.settings import NAMES
    names = VAULT_SETTINGS if ctx.params.get("vault") else NAMES
    return [CompletionItem(n, help=setting_text.summary(n)) for n in names if n.startswith(incomplete)]


def complete_value(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The allowed values of the setting named before it (choices, true/false), if it has such."""
    from hybrid.core import setting_text
    from hybrid.core.settings import NAMES
    key = ctx.params.get("key")
    if key not in NAMES:
        return []
    return [CompletionItem(v) for v in setting_text.choices(key) if v.startswith(incomplete)]


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion_cmd(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL (bash, zsh or fish): commands, options, vault
    names, setting names and their allowed values.

    \b
    bash:  eval "$(hybrid completion bash)"      (in ~/.bashrc; bash 4.4 or later)
    zsh:   eval "$(hybrid completion zsh)"       (in ~/.zshrc, after compinit)
    fish:  hybrid completion fish > ~/.config/fish/completions/hybrid.fish
    """
    from click.shell_completion import get_completion_class
    cls = get_completion_class(shell)
    assert cls is not None  # click ships all three
    click.echo(cls(ctx.find_root().command, {}, PROG, COMPLETE_VAR).source())
