"""A Kubernetes CronJob schedule, read as the API server reads it, and the times it fires.

The API server validates `spec.schedule` with robfig/cron/v3's standard parser (five fields — minute, hour, day of
month, month, day of week — names of months and days, `*`, `?`, lists, ranges, steps, and the descriptors @yearly,
@annually, @monthly, @weekly, @daily, @midnight, @hourly); tests/test_etcd_backup.py holds this reader to that parser
(tools/k8s-decode) on one table of schedules. Refused here although the parser takes them: `@every DURATION` (not a
calendar: the controller's next run depends on when it started) and a `TZ=`/`CRON_TZ=` prefix (the API server
refuses it: a CronJob says its time zone in `spec.timeZone`). Times are UTC, as a CronJob without `timeZone` in a
cluster whose controller manager runs in UTC (Talos' does).

    parse("0 */6 * * *")             -> Schedule (or ValueError, one line with the fix)
    Schedule.previous(now, count)    -> the `count` latest times it fired at or before `now`, newest first

Standard library only.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import datetime, timedelta

DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name}
DAYS = {name.lower(): (number + 1) % 7 for number, name in enumerate(calendar.day_abbr)}  # sun=0
# (name, lowest, highest, names): robfig's bounds; day of week 7 is not Sunday there.
FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, MONTHS),
    ("day of week", 0, 6, DAYS),
)
# How far back previous() looks: a schedule that fires less than once in this span is refused by it.
HORIZON = timedelta(days=366 * 5)


@dataclass(frozen=True)
class Schedule:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool  # day of month was * (or ?)
    any_weekday: bool

    def fires_on(self, day: datetime) -> bool:
        """cron's day rule: when both day fields are restricted, either may match; else both must."""
        if day.month not in self.months:
            return False
        in_month, in_week = day.day in self.days, (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week

    def previous(self, now: datetime, count: int) -> list[datetime]:
        """The `count` latest firing times at or before `now` (a naive UTC datetime), newest first."""
        found: list[datetime] = []
        moment = now.replace(second=0, microsecond=0)
        limit = now - HORIZON
        while len(found) < count and moment >= limit:
            if not self.fires_on(moment):
                moment = moment.replace(hour=23, minute=59) - timedelta(days=1)
                continue
            if moment.hour not in self.hours:
                moment = moment.replace(minute=59) - timedelta(hours=1)
                continue
            if moment.minute in self.minutes:
                found.append(moment)
            moment -= timedelta(minutes=1)
        if len(found) < count:
            raise ValueError(f"schedule {self.text!r} does not fire {count} times in five years")
        return found


def _value(text: str, low: int, high: int, names: dict[str, int], field: str) -> int:
    lowered = text.lower()
    if lowered in names:
        return names[lowered]
    if not text.isdigit():
        raise ValueError(f"{field} {text!r} is not a number from {low} to {high}")
    number = int(text)
    if not low <= number <= high:
        raise ValueError(f"{field} {number} is outside {low}-{high}")
    return number


def _field(text: str, low: int, high: int, names: dict[str, int], field: str) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    star = False
    for part in text.split(","):
        if not part:
            raise ValueError(f"{field} {text!r} has an empty list item")
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ValueError(f"{field} step {step_text!r} is not a whole number above 0")
            step = int(step_text)
        if base in ("*", "?"):
            first, last = low, high
            star = star or step == 1  # robfig: a step above 1 makes `*` a restriction
        elif "-" in base:
            start, _, end = base.partition("-")
            first, last = _value(start, low, high, names, field), _value(end, low, high, names, field)
            if first > last:
                raise ValueError(f"{field} range {base!r} runs backwards")
        else:
            first = _value(base, low, high, names, field)
            last = high if step_text else first
        values.update(range(first, last + 1, step))
    return frozenset(values), star


def parse(text: str) -> Schedule:
    """A CronJob schedule; ValueError (one line, with an example) when the API server would refuse it."""
    stripped = text.strip()
    if stripped.startswith(("TZ=", "CRON_TZ=")):
        raise ValueError("a time zone in the schedule is refused by Kubernetes: give the fields only (UTC)")
    if stripped.startswith("@every"):
        raise ValueError("@every is not a calendar schedule: write the five cron fields, e.g. '0 */6 * * *'")
    fields = DESCRIPTORS.get(stripped, stripped).split()
    if stripped.startswith("@") and stripped not in DESCRIPTORS:
        raise ValueError(f"unknown descriptor {stripped!r}: use {', '.join(DESCRIPTORS)} or five cron fields")
    if len(fields) != 5:
        raise ValueError(
            f"has {len(fields)} field(s): give five — minute hour day-of-month month day-of-week, e.g. '0 */6 * * *'"
        )
    parsed = [
        _field(part, low, high, names, name) for part, (name, low, high, names) in zip(fields, FIELDS, strict=True)
    ]
    (minutes, _), (hours, _), (days, any_day), (months, _), (weekdays, any_weekday) = parsed
    return Schedule(stripped, minutes, hours, days, months, weekdays, any_day, any_weekday)
