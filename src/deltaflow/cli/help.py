"""How ``deltaflow --help`` reads: verbs grouped in the order of work, plain placeholders, honest usage lines.

Typer shows every flag with a ``<bool>`` placeholder, each value as ``<str>`` or ``<int range>``, required
arguments in braces and hidden ones in the usage line. :func:`tidy` rewrites the built command tree once,
before it parses anything: flags get no placeholder, values an upper-case one (``N``, ``PATH``, ``TEXT``, or
the option's own ``metavar=``), and the verbs fall into panels in the order a user works with them.

Examples:
    >>> command = tidy(typer.main.get_command(app))  # doctest: +SKIP
    >>> command.main(["--help"])  # doctest: +SKIP

"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperGroup, TyperOption

#: The verbs by panel, each panel in the order of a day's work; a verb not named here goes last.
PANELS: dict[str, tuple[str, ...]] = {
    "Build and run": ("init", "dry-run", "graph", "plan", "run", "demo"),
    "Look at the pipeline and its tables": ("status", "ui", "show", "sql", "history", "changes",
                                            "quarantine"),
    "Maintenance": ("optimize", "vacuum", "rewind"),
    "Local servers (development, tests)": ("kafka", "s3", "cluster", "metastore"),
    "Setup": ("setup", "schema"),
}

#: Placeholders by what an option holds rather than by its type.
NAMED = {"where": "SQL", "interval": "DURATION", "retain": "DURATION", "refresh": "DATASETS",
         "full_refresh": "DATASETS", "zorder": "COLUMNS", "host": "ADDRESS", "port": "PORT"}


def tidy(command: Any, root: bool = True) -> Any:
    """``command`` (a click group or command) with the placeholders, usage lines and (root) panels above."""
    for param in command.params:
        _placeholder(param)
    help_option = command.get_help_option

    def plain_help_option(ctx: Any) -> Any:
        option = help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = plain_help_option
    if isinstance(command, TyperGroup):
        if root:
            _arrange(command)
        for sub in command.commands.values():
            tidy(sub, root=False)
    else:
        command.collect_usage_pieces = lambda ctx, c=command: _usage(c, ctx)
    return command


def _placeholder(param: Any) -> None:
    if isinstance(param, TyperArgument):  # its name is its placeholder: no type beside it
        param.metavar = param.metavar or (param.name or "").upper()
        param.display_type_rich = lambda ctx: None  # type: ignore[method-assign]
    elif isinstance(param, TyperOption) and param.metavar is None:
        param.metavar = "" if param.is_flag else NAMED.get(param.name or "") or _type_name(param)


def _type_name(option: TyperOption) -> str:
    kind = option.type_descriptor
    if kind.is_choice:
        return "|".join(str(c) for c in kind.choices or ())
    if kind.is_path:
        return "PATH"
    return {int: "N", float: "NUMBER"}.get(kind.annotation, "TEXT")


def _usage(command: Any, ctx: Any) -> list[str]:
    """``[OPTIONS] TABLE [REST]``: the visible arguments by their names, optional ones in brackets."""
    pieces = [command.options_metavar] if command.get_params(ctx) else []
    for param in command.params:
        if isinstance(param, TyperArgument) and not param.hidden:
            name = param.metavar or (param.name or "").upper()
            pieces.append(name if param.required else f"[{name}]")
    return pieces


def _arrange(group: Any) -> None:
    """The group's verbs in :data:`PANELS` order, each with its panel's title."""
    order = [name for names in PANELS.values() for name in names]
    panel_of = {name: title for title, names in PANELS.items() for name in names}
    rank = {name: i for i, name in enumerate(order)}
    commands = sorted(group.commands.items(), key=lambda item: rank.get(item[0], len(order)))
    group.commands = dict(commands)
    for name, sub in group.commands.items():
        if name in panel_of:
            sub.rich_help_panel = panel_of[name]
