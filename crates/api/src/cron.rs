//! Cron schedules as CronJobs take them (the standard five fields of
//! robfig/cron, which Kubernetes uses): minute, hour, day of month, month,
//! day of week, with `*`, `?`, lists, ranges, steps and month/day names, or
//! a macro (`@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
//! `@midnight`, `@hourly`); and the next run time in a time zone.
//!
//! Written here rather than taken from a cron crate, on purpose: the
//! maintained ones (croner, cron) implement other specifications, and both
//! differences reach users. Grammar: croner accepts `L`, `W`, `#`, seconds
//! and day of week 7, which robfig's standard parser refuses with messages
//! kubectl shows in a 422 ("end of range (7) above maximum (6): 7"). Time:
//! croner follows the Open Cron Pattern Specification, which runs a job whose
//! local time falls in a daylight-saving gap at the first instant after the
//! gap; robfig (so a Kubernetes CronJob) skips that day's run (`30 2 * * *`
//! in New York on 2026-03-08 next runs on the 9th). The tests below pin
//! both, Kubernetes' behaviour being the reference.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

/// A parsed schedule: the allowed values of each field as bit sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// Day of month or day of week was `*` (or `?`): then both must match,
    /// otherwise either may (cron's rule).
    any_day: bool,
    any_weekday: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

fn value(s: &str, names: &[&str], offset: u32) -> Result<u32, String> {
    if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
        return Ok(i as u32 + offset);
    }
    s.parse::<u32>().map_err(|_| {
        format!("failed to parse int from {s}: strconv.Atoi: parsing \"{s}\": invalid syntax")
    })
}

/// One field: `*`, `?`, `a`, `a-b`, with `/step`, comma-separated.
fn field(s: &str, min: u32, max: u32, names: &[&str], offset: u32) -> Result<(u64, bool), String> {
    let mut bits = 0u64;
    let mut star = false;
    for part in s.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, st)) => {
                let step: u32 = st
                    .parse()
                    .map_err(|_| format!("failed to parse int from {st}: strconv.Atoi: parsing \"{st}\": invalid syntax"))?;
                if step == 0 {
                    return Err(format!("step of range should be a positive number: {part}"));
                }
                (r, Some(step))
            }
            None => (part, None),
        };
        let (lo, hi) = if range == "*" || range == "?" {
            star |= step.is_none();
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a, names, offset)?, value(b, names, offset)?)
        } else {
            let v = value(range, names, offset)?;
            (v, if step.is_some() { max } else { v })
        };
        if lo < min {
            return Err(format!(
                "beginning of range ({lo}) below minimum ({min}): {part}"
            ));
        }
        if hi > max {
            return Err(format!("end of range ({hi}) above maximum ({max}): {part}"));
        }
        if lo > hi {
            return Err(format!(
                "beginning of range ({lo}) beyond end of range ({hi}): {part}"
            ));
        }
        let step = step.unwrap_or(1);
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, star))
}

/// Parses a CronJob's `spec.schedule`; Err is the message Kubernetes shows.
pub fn parse(schedule: &str) -> Result<Schedule, String> {
    let s = schedule.trim();
    if s.starts_with("TZ=") || s.starts_with("CRON_TZ=") {
        return Err("cannot use TZ or CRON_TZ in schedule, use timeZone field instead".into());
    }
    let expanded = match s {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        other if other.starts_with('@') => return Err(format!("unrecognized descriptor: {other}")),
        other => other,
    };
    let fields: Vec<&str> = expanded.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: {s}",
            fields.len()
        ));
    }
    let (minutes, _) = field(fields[0], 0, 59, &[], 0)?;
    let (hours, _) = field(fields[1], 0, 23, &[], 0)?;
    let (days, any_day) = field(fields[2], 1, 31, &[], 0)?;
    let (months, _) = field(fields[3], 1, 12, &MONTHS, 1)?;
    let (weekdays, any_weekday) = field(fields[4], 0, 6, &WEEKDAYS, 0)?;
    Ok(Schedule {
        minutes,
        hours,
        days,
        months,
        weekdays,
        any_day,
        any_weekday,
    })
}

/// A CronJob's `spec.timeZone` (an IANA name); None means UTC here.
pub fn time_zone(name: Option<&str>) -> Result<Tz, String> {
    match name {
        None => Ok(Tz::UTC),
        Some(n) => n
            .parse::<Tz>()
            .map_err(|_| format!("unknown time zone {n}")),
    }
}

fn has(bits: u64, v: u32) -> bool {
    bits & (1 << v) != 0
}

impl Schedule {
    fn day_matches(&self, date: NaiveDate) -> bool {
        let dom = has(self.days, date.day());
        let dow = has(self.weekdays, date.weekday().num_days_from_sunday());
        if self.any_day || self.any_weekday {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first run strictly after `after`, in `tz` (None beyond five years:
    /// a schedule like Feb 30 never runs).
    pub fn next_after(&self, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&tz).naive_local();
        // The next whole minute.
        let mut t = local.with_second(0)?.with_nanosecond(0)? + chrono::Duration::minutes(1);
        let limit = t + chrono::Duration::days(5 * 366);
        while t < limit {
            if !has(self.months, t.month()) {
                t = first_of_next_month(t)?;
                continue;
            }
            if !self.day_matches(t.date()) {
                t = (t.date() + chrono::Duration::days(1)).and_hms_opt(0, 0, 0)?;
                continue;
            }
            if !has(self.hours, t.hour()) {
                t = t.with_minute(0)? + chrono::Duration::hours(1);
                continue;
            }
            if !has(self.minutes, t.minute()) {
                t += chrono::Duration::minutes(1);
                continue;
            }
            // A local time the zone skips (spring forward) does not run that
            // day, as robfig's walk over local hours steps past it; a repeated
            // one (fall back) runs at its first occurrence.
            match tz.from_local_datetime(&t) {
                chrono::LocalResult::Single(d) | chrono::LocalResult::Ambiguous(d, _) => {
                    let utc = d.with_timezone(&Utc);
                    if utc > after {
                        return Some(utc);
                    }
                }
                chrono::LocalResult::None => {}
            }
            t += chrono::Duration::minutes(1);
        }
        None
    }
}

fn first_of_next_month(t: NaiveDateTime) -> Option<NaiveDateTime> {
    let (y, m) = if t.month() == 12 {
        (t.year() + 1, 1)
    } else {
        (t.year(), t.month() + 1)
    };
    NaiveDate::from_ymd_opt(y, m, 1)?.and_hms_opt(0, 0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn next(schedule: &str, after: &str, tz: Tz) -> String {
        parse(schedule)
            .unwrap()
            .next_after(at(after), tz)
            .map(|t| t.to_rfc3339())
            .unwrap_or_default()
    }

    #[test]
    fn fields_macros_and_names() {
        assert_eq!(
            next("*/15 * * * *", "2026-11-24T10:07:30Z", Tz::UTC),
            "2026-11-24T10:15:00+00:00"
        );
        assert_eq!(
            next("0 9 * * MON-FRI", "2026-11-27T10:00:00Z", Tz::UTC),
            "2026-11-30T09:00:00+00:00"
        );
        assert_eq!(
            next("@hourly", "2026-11-24T10:00:00Z", Tz::UTC),
            "2026-11-24T11:00:00+00:00"
        );
        assert_eq!(
            next("@monthly", "2026-12-15T00:00:00Z", Tz::UTC),
            "2027-01-01T00:00:00+00:00"
        );
        assert_eq!(
            next("@yearly", "2026-01-01T00:00:00Z", Tz::UTC),
            "2027-01-01T00:00:00+00:00"
        );
        assert_eq!(
            next("5,35 1-3 * jan,jul *", "2026-11-24T00:00:00Z", Tz::UTC),
            "2027-01-01T01:05:00+00:00"
        );
        // Day of month and day of week both restricted: either matches.
        assert_eq!(
            next("0 0 13 * FRI", "2026-11-24T00:00:00Z", Tz::UTC),
            "2026-11-27T00:00:00+00:00"
        );
        // Never: February 30th.
        assert_eq!(next("0 0 30 2 *", "2026-11-24T00:00:00Z", Tz::UTC), "");
    }

    #[test]
    fn time_zones_and_daylight_saving() {
        let ny = time_zone(Some("America/New_York")).unwrap();
        // 9:00 in New York is 14:00 UTC in winter, 13:00 in summer.
        assert_eq!(
            next("0 9 * * *", "2026-11-24T15:00:00Z", ny),
            "2026-11-25T14:00:00+00:00"
        );
        assert_eq!(
            next("0 9 * * *", "2026-07-01T15:00:00Z", ny),
            "2026-07-02T13:00:00+00:00"
        );
        // 2:30 does not exist on 2026-03-08 in New York: the next run is the day after.
        assert_eq!(
            next("30 2 * * *", "2026-03-08T05:00:00Z", ny),
            "2026-03-09T06:30:00+00:00"
        );
        // 1:30 happens twice on 2026-11-01 in New York: the first one runs.
        assert_eq!(
            next("30 1 * * *", "2026-11-01T04:00:00Z", ny),
            "2026-11-01T05:30:00+00:00"
        );
        assert!(time_zone(Some("Mars/Olympus")).is_err());
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(
            parse("* * * *").unwrap_err(),
            "expected exactly 5 fields, found 4: * * * *"
        );
        assert_eq!(
            parse("61 * * * *").unwrap_err(),
            "end of range (61) above maximum (59): 61"
        );
        assert_eq!(
            parse("@reboot").unwrap_err(),
            "unrecognized descriptor: @reboot"
        );
        assert_eq!(
            parse("TZ=UTC 0 * * * *").unwrap_err(),
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
        );
        // What other cron dialects take and robfig's standard parser refuses.
        assert_eq!(
            parse("0 0 * * 7").unwrap_err(),
            "end of range (7) above maximum (6): 7"
        );
        assert!(parse("0 0 L * *").is_err());
        assert!(parse("0 0 * * 1#2").is_err());
        assert!(parse("0 0 0 * * *").is_err(), "six fields (seconds)");
        assert!(parse("*/0 * * * *").is_err());
        assert!(parse("x * * * *").is_err());
    }
}
