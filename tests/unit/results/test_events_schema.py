"""events.parquet's schema: written and read back with its dtypes; a run without changes reads as empty."""

from distro_bench.results.events import EVENT_COLUMNS, events_frame, read_events, write_events


def test_round_trip_keeps_rows_and_dtypes(tmp_path):
    rows = [{"optimizer": "adamw", "seed": 0, "time": 1.7e9, "t_s": 30.05, "scheduled_s": 30.0, "step": 12,
             "node": "node1", "direction": "up", "kind": "schedule", "field": "rate", "requested": "1Mbit",
             "verified": "1Mbit", "ok": True, "detail": "node1 up rate 10Mbit -> 1Mbit"}]
    write_events(tmp_path, rows)
    df = read_events(tmp_path)
    assert list(df.columns) == list(EVENT_COLUMNS)
    assert df.loc[0, "requested"] == "1Mbit" and df.loc[0, "step"] == 12
    assert df["until_s"].isna().all()
    assert str(df["ok"].dtype) == "boolean"


def test_missing_file_is_an_empty_frame(tmp_path):
    df = read_events(tmp_path)
    assert df.empty and list(df.columns) == list(EVENT_COLUMNS)
    assert events_frame([]).dtypes.to_dict() == df.dtypes.to_dict()
