"""How the framework renders its Jinja2 templates (the agents' prompts, the generated packages).

Strict: a name the caller did not give is an error, never a silently empty value. Trailing
newlines are kept and nothing is HTML-escaped: the output is prompts and source files.
"""

from __future__ import annotations

from pathlib import Path

import jinja2


def strict_environment(folder: Path, *, trim_blocks: bool = False) -> jinja2.Environment:
    """Templates from `folder`; `trim_blocks` also drops the newline and indent around block tags."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=trim_blocks,
        lstrip_blocks=trim_blocks,
        keep_trailing_newline=True,
        autoescape=False,
    )
