import pytest

from distro_bench.scenario.units import (
    format_duration,
    format_percent,
    format_rate,
    format_size,
    parse_duration,
    parse_percent,
    parse_rate,
    parse_size,
)


@pytest.mark.parametrize("text,bits", [("500kbit", 500_000), ("10Mbit", 10_000_000), ("1Gbit", 10**9),
                                       ("2.5mbit", 2_500_000), ("100Mbit/s", 100_000_000)])
def test_rates_parse_in_bits_per_second(text, bits):
    assert parse_rate(text) == bits


@pytest.mark.parametrize("text", ["10MB", "10mbps", "10Mbps", "10", "fast", "10 Mfoo", "1kbit"])
def test_ambiguous_or_bad_rates_are_rejected_with_advice(text):
    with pytest.raises(ValueError) as e:
        parse_rate(text)
    assert "Mbit" in str(e.value) or "8kbit" in str(e.value)


def test_bytes_rate_message_says_what_to_write():
    with pytest.raises(ValueError, match="80Mbit for 10 megabytes"):
        parse_rate("10MB")


def test_durations_percentages_sizes():
    assert parse_duration("15ms") == pytest.approx(0.015)
    assert parse_duration("1s") == 1.0
    assert parse_duration("50us") == pytest.approx(50e-6)
    assert parse_duration(0) == 0.0
    assert parse_duration("10min") == 600.0 and parse_duration("1.5 h") == 5400.0
    assert parse_percent("0.1%") == pytest.approx(0.001)
    assert parse_size("8GiB") == 8 * 2**30
    assert parse_size("512MB") == 512 * 10**6
    for bad, fn in (("15", parse_duration), (15, parse_duration), ("15 m", parse_duration), ("15 minutes", parse_duration),
                    ("0.1", parse_percent), ("120%", parse_percent), ("8", parse_size), ("8Gbit", parse_size)):
        with pytest.raises(ValueError):
            fn(bad)


def test_formatting_round_trips():
    for text in ("10Mbit", "500kbit", "1Gbit"):
        assert format_rate(parse_rate(text)) == text
    for text in ("15ms", "1s", "50us"):
        assert format_duration(parse_duration(text)) == text
    assert format_percent(parse_percent("0.5%")) == "0.5%"
    assert format_size(parse_size("8GiB")) == "8GiB"
