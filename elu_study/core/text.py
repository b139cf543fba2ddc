"""Prose from templates (``elu_study/templates/**/*.md.j2``) filled with numbers the jobs compute; code here only
formats numbers. ``show`` gives a notebook text whose plain-text form is the text itself, so that nbval compares it."""

import jinja2

from elu_study.core.tables import compact, markdown


def fmt_n(n: int) -> str:
    """2^20 for powers of two, else the number with thousands separators."""
    n = int(n)
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else f"{n:,}"


def fmt_bytes(b: float) -> str:
    """Bytes in the largest binary unit that keeps the value at least 1: 8 KiB, 1.5 GiB."""
    unit, scale = next(((u, s) for u, s in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)) if b >= s), ("B", 1))
    v = b / scale
    return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"


def fmt(value, spec: str = ".3f", none: str = "n/a") -> str:
    """A number with a format spec; None or NaN as ``none``."""
    return none if value is None or value != value else format(value, spec)


def join(items) -> str:
    """a, b and c; none for no items."""
    *head, last = [str(i) for i in items] or ["none"]
    return f"{', '.join(head)} and {last}" if head else last


def table(df, formats: dict | None = None, padded: bool = False) -> str:
    """A DataFrame as the study's pipe table (``padded``: its columns aligned in plain text)."""
    return markdown(df, formats) if padded else compact(markdown(df, formats))


ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("elu_study", "templates"),
    undefined=jinja2.StrictUndefined,  # a name a template uses and the code did not pass is an error
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters.update(f=fmt, n=fmt_n, join=join, table=table)


def render(name: str, **numbers) -> str:
    """The template ``name`` (a path under elu_study/templates) filled with ``numbers``, stripped."""
    return ENV.get_template(name).render(**numbers).strip()


class Text(str):
    """Markdown for a notebook whose plain-text form is the markdown itself (nbval compares it)."""

    _repr_markdown_ = __repr__ = str.__str__


def show(name: str, **numbers) -> Text:
    """``render`` for a notebook cell."""
    return Text(render(name, **numbers))
