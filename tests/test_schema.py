"""Every record's type (elu_study.core.schema): each committed record is of its job's type, and a record that is not
(a wrong type, a missing field, a value outside its set, deep inside) is refused on load, naming the file and the
field; the JSON Schema readers get is generated from the same types."""

from __future__ import annotations

import json
import re

import pytest

from elu_study.core import record, schema

DELETE = object()
COMMITTED = {job: record.record_path(job=job) for job in record.VERSIONS}

# (job, where, the value put there (DELETE: the key removed), msgspec's words, the field path it names)
BROKEN = [
    ("study", ("rows", 3, "timing", "runs"), "5", "Expected `int`, got `str`", "$.rows[3].timing.runs"),
    ("study", ("rows", 2, "timing", "nvml", 0, "samples"), DELETE, "Object missing required field `samples`",
     "$.rows[2].timing.nvml[0]"),
    ("study", ("rows", 1, "direction"), "sideways", "Invalid enum value 'sideways'", "$.rows[1].direction"),
    ("study", ("rows", 5, "timing", "round_medians_ms", 2), None, "Expected `float`, got `null`",
     "$.rows[5].timing.round_medians_ms[2]"),
    ("ncu", ("rows", 4, "stalls", "wait"), "0.3", "Expected `float`, got `str`", "$.rows[4].stalls[...]"),
    ("ncu", ("ncu", "command"), DELETE, "Object missing required field `command`", "$.ncu"),
    ("accuracy", ("runs", "1.5", "formulas", "F.elu", "tolerance", "n_fail"), 1.5, "Expected `int`, got `float`",
     "$.runs[...].formulas[...].tolerance.n_fail"),
    ("accuracy", ("runs", "1.0", "same_as", "2_float4", "n_differ"), DELETE, "Object missing required field `n_differ`",
     "$.runs[...].same_as[...]"),
    ("sanitize", ("builds", "5_streaming", "memcheck", "errors"), "2", "Expected `int | null`, got `str`",
     "$.builds[...][...].errors"),
    ("sanitize", ("builds", "5_streaming", "racecheck", "ok"), DELETE, "Object missing required field `ok`",
     "$.builds[...][...]"),
    ("beyond", ("processes", 2, "copy_", "median_ms"), DELETE, "Object missing required field `median_ms`",
     "$.processes[2][...]"),
    ("beyond", ("rows", 5, "dtype"), "float8", "Invalid enum value 'float8'", "$.rows[5].dtype"),
    ("sizes", ("points", 40, "cold", "p90_ms"), None, "Expected `float`, got `null`", "$.points[40].cold.p90_ms"),
    ("sizes", ("regimes", "warm_gain", "2^10"), 1.0, "Expected `str` matching regex '^[1-9][0-9]*$'",
     "key` in `$.regimes.warm_gain"),
    ("launch", ("cells", 7, "occupancy", "registers"), "32", "Expected `int`, got `str`", "$.cells[7].occupancy.registers"),
    ("launch", ("references", "2_float4", "check", "trials"), DELETE, "Object missing required field `trials`",
     "$.references.2_float4.check"),
    ("model", ("host_cost", 3, "us_per_call"), "12.5", "Expected `float`, got `str`", "$.host_cost[3].us_per_call"),
    ("model", ("end_to_end", 0, "noise_ms"), DELETE, "Object missing required field `noise_ms`", "$.end_to_end[0]"),
    ("model", ("end_to_end", 5, "timer"), "wallclock", "Invalid enum value 'wallclock'", "$.end_to_end[5].timer"),
    ("model", ("end_to_end", 6, "device_events"), 0, "Expected `int` >= 1", "$.end_to_end[6].device_events"),
    ("sixteen", ("rows", 4, "batch"), DELETE, "Object missing required field `batch`", "$.rows[4]"),
    ("sixteen", ("rows", 9, "mode"), "int8", "Invalid enum value 'int8'", "$.rows[9].mode"),
    ("sixteen", ("sass16", "7_poly bfloat16", "error"), "no cuobjdump",
     "expected every field but 'error', or 'error' alone", "$.sass16[...]"),
    ("tests", ("fuzz", "hypothesis_seed"), 1.5, "Expected `int | str`, got `float`", "$.fuzz.hypothesis_seed"),
    ("tests", ("counts", "xfailed"), DELETE, "Object missing required field `xfailed`", "$.counts"),
    ("tests", ("fuzz", "builds"), "some", "Invalid enum value 'some'", "$.fuzz.builds"),
]


def committed(job: str) -> dict:
    return json.loads(COMMITTED[job].read_text())


@pytest.mark.parametrize("job", record.VERSIONS)
def test_every_committed_record_is_of_its_type_and_comes_back_as_it_was(job):
    raw = committed(job)
    assert record.check_schema(raw, job, COMMITTED[job]) is raw
    assert raw == committed(job)  # validation only: nothing converted, added or dropped


@pytest.mark.parametrize(("job", "where", "value", "words", "at"), BROKEN, ids=lambda v: v if isinstance(v, str) else None)
def test_a_record_broken_deep_inside_is_refused_naming_the_file_and_the_field(job, where, value, words, at):
    bad = committed(job)
    node = bad
    for key in where[:-1]:
        node = node[key]
    if value is DELETE:
        del node[where[-1]]
    else:
        node[where[-1]] = value
    with pytest.raises(record.RecordError) as err:
        record.check_schema(bad, job, COMMITTED[job])
    assert str(err.value).startswith(f"{COMMITTED[job]}: {words}") and str(err.value).endswith(f"{at}`")


def test_every_job_is_typed_with_the_pieces_every_record_shares():
    assert set(schema.TYPES) == set(record.VERSIONS)
    assert all(issubclass(kind, schema.Record) for kind in schema.TYPES.values())


def _properties(node, name=""):
    """(property name, its schema) for every property anywhere in a JSON Schema."""
    if isinstance(node, dict):
        for key, value in node.get("properties", {}).items():
            yield key, value
        for key, value in node.items():
            yield from _properties(value, key)
    elif isinstance(node, list):
        for value in node:
            yield from _properties(value)


KNOWN_UNITS = {"ms", "µs", "ns", "s", "%", "ulp", "GiB", "TB/s", "1/s", "1/ms", "B/s", "B", "elements", "MHz", "W", "J"}
UNITS = {"_bytes_per_s": "B/s", "_cycles_per_s": "1/s", "_per_ms": "1/ms",  # a name's suffix -> its unit
         "_ms": "ms", "_ns": "ns", "_s": "s", "_pct": "%", "_tbps": "TB/s", "_gib": "GiB", "_bytes": "B",
         "us_per_call": "µs", "_mhz": "MHz", "_w": "W", "_j": "J"}


@pytest.mark.parametrize("job", record.VERSIONS)
def test_the_generated_json_schema_carries_each_numbers_unit_by_its_name(job, capsys):
    generated = record.json_schema(job)
    assert record.main([job]) == 0 and json.loads(capsys.readouterr().out) == generated
    assert generated["title"] == f"elu-study {job} record, schema version {record.VERSIONS[job]}"
    checked = 0
    for name, prop in _properties(generated):
        unit = next((u for suffix, u in UNITS.items() if name.endswith(suffix)), None)
        if unit and "$ref" not in prop and prop.get("type") != "object":
            while prop.get("type") == "array":  # a list of numbers carries the unit on its items
                prop = prop["items"]
            found = prop.get("unit") or next((p.get("unit") for p in prop.get("anyOf", []) if "unit" in p), None)
            assert found == unit, f"{job}: {name} is in {found!r}, not {unit}"
            checked += 1
    assert checked or job in ("sanitize", "tests")
    assert set(re.findall(r'"unit": "([^"]*)"', json.dumps(generated, ensure_ascii=False))) <= KNOWN_UNITS


def test_a_record_of_its_type_needs_only_what_the_type_requires():
    """An optional part may be absent (a record before its fingerprint is written) but not null; keys the type does
    not name are kept for the code that reads them."""
    rec = committed("study")
    del rec["fingerprint"]
    rec["rows"][0]["note"] = "a key the type does not name"
    assert record.check_schema(rec, "study", "x.json")["rows"][0]["note"] == "a key the type does not name"
    rec["fingerprint"] = None
    with pytest.raises(record.RecordError, match=r"x\.json: Expected `object`, got `null` - at `\$\.fingerprint`"):
        record.check_schema(rec, "study", "x.json")


def test_a_type_given_twice_keeps_both_groups_and_a_field_named_twice_is_refused():
    """``_alike`` takes (type, names) pairs in order: a second group of one type adds its fields (a dict keyed by
    type would drop the first group silently, and a record missing those fields would still validate)."""
    t = schema._alike("T", [(str, "name kind"), (int, "n"), (str, "extra")])
    assert t.__struct_fields__ == ("name", "kind", "n", "extra")
    with pytest.raises(TypeError, match="named twice"):
        schema._alike("U", [(str, "a b"), (int, "a")])
