"""What the tests hold a committed record to, whatever entries the catalogue has gained since it was measured or
the protocols it holds."""

import copy

from elu_study.core import derived, fingerprint


def assert_rows_are_the_catalogues(rec: dict, entries) -> None:
    """A record measured with this catalogue holds one row per entry, no more and no fewer; one measured with an
    older catalogue is due (``records --plan``), its rows each an entry or one the catalogue has lost since."""
    names = [r["name"] for r in rec["rows"]]
    assert len(names) == len(set(names)), "a row twice"
    if fingerprint.catalogue_current(rec):
        assert set(names) == {e.name for e in entries}, "rows and catalogue differ, though measured with it"


def without_sustained(rec: dict) -> dict:
    """A copy of a record as the short protocol alone leaves it (no ``sustained`` timing), derived columns made
    again: what a test that adds its own sustained timings starts from."""
    out = copy.deepcopy(rec)
    for r in out["rows"]:
        r["timing"].pop("sustained", None)
    out.get("method", {}).pop("sustained", None)
    return derived.annotate(out)
