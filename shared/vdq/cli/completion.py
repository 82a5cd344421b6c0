"""Shell completion for ``vdq``, written from the parser itself (commands, options, choices).

``eval "$(vdq completion bash)"`` in ~/.bashrc; zsh runs the same function through
``bashcompinit``. Options completed after a command are that command's; after ``--state`` or
``--method`` (or any option with choices) the choices; after ``--attach`` and
``--attach-large`` file names.
"""

from __future__ import annotations

import argparse
import shlex


def _commands(top: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(p: argparse.ArgumentParser) -> list[str]:
    return sorted(o for a in p._actions if a.help != argparse.SUPPRESS for o in a.option_strings)


def _valued(p: argparse.ArgumentParser) -> dict[str, list[str] | None]:
    """Options that take a value: their choices, or None for free text."""
    out: dict[str, list[str] | None] = {}
    for a in p._actions:
        if a.option_strings and a.nargs != 0:
            choices = [str(c) for c in a.choices] if a.choices else None
            out.update({o: choices for o in a.option_strings})
    return out


def script(top: argparse.ArgumentParser, shell: str) -> str:
    commands = _commands(top)
    global_valued = [o for o, _ in _valued(top).items()]
    cases = []
    for name, p in commands.items():
        cases.append(f"    {name}) opts={shlex.quote(' '.join(_options(p)))} ;;")
    values = []
    for p in (top, *commands.values()):
        for option, choices in _valued(p).items():
            if choices:
                values.append(f"    {option}) COMPREPLY=($(compgen -W "
                              f"{shlex.quote(' '.join(choices))} -- \"$cur\")); return ;;")
    values.append('    --attach|--attach-large) COMPREPLY=($(compgen -f -- "$cur")); return ;;')
    free = sorted({o for p in (top, *commands.values()) for o, c in _valued(p).items()
                   if c is None and o not in ("--attach", "--attach-large")})  # fmt: skip
    values.append(f"    {'|'.join(free)}) return ;;")
    body = f"""_vdq() {{
  local cur prev cmd opts i w skip
  cur="${{COMP_WORDS[COMP_CWORD]}}"
  prev="${{COMP_WORDS[COMP_CWORD-1]}}"
  COMPREPLY=()
  case "$prev" in
{chr(10).join(sorted(set(values)))}
  esac
  cmd=""
  skip=0
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${{COMP_WORDS[i]}}"
    if ((skip)); then skip=0; continue; fi
    case "$w" in
      {'|'.join(global_valued)}) skip=1 ;;
      -*) ;;
      *) cmd="$w"; break ;;
    esac
  done
  if [[ -z "$cmd" ]]; then
    COMPREPLY=($(compgen -W {shlex.quote(' '.join([*commands, *_options(top)]))} -- "$cur"))
    return
  fi
  opts=""
  case "$cmd" in
{chr(10).join(cases)}
  esac
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}}
complete -F _vdq vdq
"""
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body
