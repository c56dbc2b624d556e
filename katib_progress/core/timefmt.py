"""RFC 3339 time parsing and formatting, with the exact rules Go (Kubernetes, Katib) applies.

- ``parse_rfc3339`` accepts what Go's ``time.Parse(time.RFC3339Nano, s)`` accepts: an upper-case
  ``T`` separator, ASCII digits, an optional fraction of 1..9 digits and a mandatory zone (``Z`` or
  ``+hh:mm``). The result is an aware UTC datetime truncated to whole microseconds (Katib's MySQL
  column is ``DATETIME(6)`` and Go formats it by truncation).
- ``format_rfc3339nano`` writes what Go's ``t.UTC().Format(time.RFC3339Nano)`` writes: ``Z`` zone,
  trailing zeros of the fraction removed and no dot at all when the fraction is zero.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

_RFC3339 = re.compile(
    r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})T(?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2})"
    r"(?:\.(?P<frac>[0-9]{1,9}))?(?P<tz>Z|[+-][0-9]{2}:[0-9]{2})",
    re.ASCII,
)


def parse_rfc3339(value: object, *, field: str = "time") -> datetime:
    """Parse an RFC 3339 timestamp into an aware UTC datetime (microsecond precision).

    Raises ``ValueError`` naming ``field`` and the offending value.
    """
    if not isinstance(value, str):
        raise ValueError(f"{field}: expected an RFC 3339 string, got {type(value).__name__} {value!r}")
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise ValueError(f"{field}: not an RFC 3339 timestamp: {value!r}")
    frac = (match["frac"] or "").ljust(6, "0")[:6]
    tz_text = match["tz"]
    if tz_text == "Z":
        tz: timezone = UTC
    else:
        hours, minutes = int(tz_text[1:3]), int(tz_text[4:6])
        if hours > 23 or minutes > 59:
            raise ValueError(f"{field}: zone offset out of range in {value!r}")
        sign = -1 if tz_text[0] == "-" else 1
        tz = timezone(sign * timedelta(hours=hours, minutes=minutes))
    try:
        parsed = datetime(
            int(match["y"]),
            int(match["mo"]),
            int(match["d"]),
            int(match["h"]),
            int(match["mi"]),
            int(match["s"]),
            int(frac),
            tzinfo=tz,
        )
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{field}: invalid date/time in {value!r}: {exc}") from None


def format_rfc3339nano(moment: datetime) -> str:
    """Format an aware datetime the way Go's ``RFC3339Nano`` layout does, in UTC."""
    if moment.tzinfo is None:
        raise ValueError(f"time: naive datetime {moment!r} has no zone")
    utc = moment.astimezone(UTC)
    # not strftime: glibc's %Y drops the zero padding of years before 1000 (Go's zero time is year 1)
    text = f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
    if utc.microsecond:
        text += "." + f"{utc.microsecond:06d}".rstrip("0")
    return text + "Z"


def floor_second(moment: datetime) -> datetime:
    """The whole second containing ``moment`` (what a metav1.Time keeps)."""
    return moment.replace(microsecond=0)
