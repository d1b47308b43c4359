//! Date shifting for `deidentify`'s `shift` operator: every date of a value
//! moves by the same number of days, so intervals between them are kept,
//! written back in the format it came in.
//!
//! Full dates (`03/14/2019`, `3/14/19`, `2019-03-14`, `14-Mar-2019`,
//! `March 14, 2019`) shift by days; dates without a year (`3/14`,
//! `March 14`) shift within a non-leap reference year; month-level dates
//! (`3/80`, `8/2019`, `Mar 2019`, `November`) shift the middle of their
//! month; weekdays move by the shift modulo 7, so `on Monday` stays
//! consistent with the shifted dates around it. A clock time after a date
//! is kept. Anything else (holidays, ranges) returns `None`: the caller
//! replaces it with a surrogate date.

/// Month names, January first.
pub const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
/// The year dates without one are placed in (not a leap year).
const REFERENCE_YEAR: i64 = 2001;

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count (inverse of [`days_from_civil`]).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

fn days_in_month(y: i64, m: i64) -> i64 {
    let next = if m == 12 {
        days_from_civil(y + 1, 1, 1)
    } else {
        days_from_civil(y, m + 1, 1)
    };
    next - days_from_civil(y, m, 1)
}

fn shift(y: i64, m: i64, d: i64, days: i64) -> Option<(i64, i64, i64)> {
    ((1..=12).contains(&m) && (1..=days_in_month(y, m)).contains(&d))
        .then(|| civil_from_days(days_from_civil(y, m, d) + days))
}

/// The month (1-12) of a month name or its abbreviation, any case.
fn month_of(word: &str) -> Option<i64> {
    let w = word.trim_end_matches('.').to_lowercase();
    if w.len() < 3 {
        return None;
    }
    MONTHS
        .iter()
        .position(|m| {
            let m = m.to_lowercase();
            m == w || (m.starts_with(&w) && (w.len() == 3 || w == "sept"))
        })
        .map(|i| i as i64 + 1)
}

/// Writes a month the way `like` was written: full or three letters, its case.
fn month_like(m: i64, like: &str) -> String {
    let full = MONTHS[(m - 1) as usize];
    let core = like.trim_end_matches('.');
    let name = if core.len() <= 4 && core.len() < full.len() {
        &full[..3]
    } else {
        full
    };
    let name = if core.chars().all(|c| c.is_uppercase()) {
        name.to_uppercase()
    } else if core.chars().all(|c| c.is_lowercase()) {
        name.to_lowercase()
    } else {
        name.to_string()
    };
    if like.ends_with('.') && name.len() == 3 {
        format!("{name}.")
    } else {
        name
    }
}

fn pad(n: i64, like: &str) -> String {
    if like.len() >= 2 {
        format!("{n:0w$}", w = like.len())
    } else {
        n.to_string()
    }
}

fn year_like(y: i64, like: &str) -> String {
    if like.len() == 2 {
        format!("{:02}", y.rem_euclid(100))
    } else {
        y.to_string()
    }
}

/// Two-digit years: 00-29 are 20xx, 30-99 are 19xx.
fn full_year(y: &str) -> Option<i64> {
    let n: i64 = y.parse().ok()?;
    Some(match y.len() {
        2 if n < 30 => 2000 + n,
        2 => 1900 + n,
        4 => n,
        _ => return None,
    })
}

/// `text` shifted by `days`, in its own format, or `None` when it is not
/// a date this module can read.
pub fn shift_date(text: &str, days: i64) -> Option<String> {
    let t = text.trim();
    if t.len() != text.len() {
        return None;
    }
    // A date followed by a clock time (`March 14, 2019 10:30 am`): shift
    // the date, keep the time, which starts at the first word with a colon.
    if let Some(at) = t.match_indices(' ').map(|(i, _)| i).find(|&i| {
        t[i + 1..]
            .split(' ')
            .next()
            .is_some_and(|w| w.contains(':'))
    }) {
        let (date, time) = (&t[..at], &t[at + 1..]);
        if !date.contains(':') {
            return shift_date(date.trim_end_matches(','), days).map(|d| format!("{d} {time}"));
        }
    }
    numeric(t, days)
        .or_else(|| written(t, days))
        .or_else(|| weekday(t, days))
}

fn numeric(t: &str, days: i64) -> Option<String> {
    let sep = t.chars().find(|c| matches!(c, '/' | '-' | '.'))?;
    let parts: Vec<&str> = t.split(sep).collect();
    if !parts
        .iter()
        .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
    {
        // `14-Mar-2019`
        if parts.len() == 3 && sep == '-' {
            let m = month_of(parts[1])?;
            let (y, mo, d) = shift(full_year(parts[2])?, m, parts[0].parse().ok()?, days)?;
            return Some(format!(
                "{}-{}-{}",
                pad(d, parts[0]),
                month_like(mo, parts[1]),
                year_like(y, parts[2])
            ));
        }
        // `Mar-2019`
        if parts.len() == 2 && sep == '-' {
            let m = month_of(parts[0])?;
            let (y, mo, _) = shift(full_year(parts[1])?, m, 15, days)?;
            return Some(format!(
                "{}-{}",
                month_like(mo, parts[0]),
                year_like(y, parts[1])
            ));
        }
        return None;
    }
    let n: Vec<i64> = parts.iter().map(|p| p.parse().unwrap_or(0)).collect();
    match parts.len() {
        3 if parts[0].len() == 4 => {
            let (y, m, d) = shift(n[0], n[1], n[2], days)?;
            Some(format!(
                "{y:04}{sep}{}{sep}{}",
                pad(m, parts[1]),
                pad(d, parts[2])
            ))
        }
        3 => {
            let (y, m, d) = shift(full_year(parts[2])?, n[0], n[1], days)?;
            Some(format!(
                "{}{sep}{}{sep}{}",
                pad(m, parts[0]),
                pad(d, parts[1]),
                year_like(y, parts[2])
            ))
        }
        2 if sep == '/' => {
            if parts[1].len() == 4 || (parts[1].len() == 2 && n[1] > 31) {
                // Month and year: `8/2019`, `3/80`.
                let (y, m, _) = shift(full_year(parts[1])?, n[0], 15, days)?;
                return Some(format!("{}/{}", pad(m, parts[0]), year_like(y, parts[1])));
            }
            // Month and day: `3/14`.
            let (_, m, d) = shift(REFERENCE_YEAR, n[0], n[1], days)?;
            Some(format!("{}/{}", pad(m, parts[0]), pad(d, parts[1])))
        }
        _ => None,
    }
}

fn written(t: &str, days: i64) -> Option<String> {
    let words: Vec<&str> = t.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let comma = t.contains(',');
    fn day(w: &str) -> Option<(i64, &str)> {
        let digits: String = w.chars().take_while(char::is_ascii_digit).collect();
        let rest = &w[digits.len()..];
        let ok =
            rest.is_empty() || ["st", "nd", "rd", "th", "ST", "ND", "RD", "TH"].contains(&rest);
        (ok && !digits.is_empty() && digits.len() <= 2).then(|| (digits.parse().unwrap_or(0), rest))
    }
    let ordinal = |d: i64, suffix: &str| -> String {
        if suffix.is_empty() {
            return d.to_string();
        }
        let s = match (d % 10, d % 100) {
            (_, 11..=13) => "th",
            (1, _) => "st",
            (2, _) => "nd",
            (3, _) => "rd",
            _ => "th",
        };
        format!(
            "{d}{}",
            if suffix.chars().all(char::is_uppercase) {
                s.to_uppercase()
            } else {
                s.to_string()
            }
        )
    };
    // `March 14, 2019`, `Mar 14 2019`, `March 14`; `14 March 2019`, `14 Mar`.
    let dated = match words.as_slice() {
        [m, d, rest @ ..] if month_of(m).is_some() && day(d).is_some() && rest.len() <= 1 => {
            Some((*m, *d, rest.first().copied(), false))
        }
        [d, m, rest @ ..] if day(d).is_some() && month_of(m).is_some() && rest.len() <= 1 => {
            Some((*m, *d, rest.first().copied(), true))
        }
        _ => None,
    };
    if let Some((m, d, year_word, day_first)) = dated {
        let (dd, suffix) = day(d)?;
        let y = match year_word {
            Some(w) => full_year(w)?,
            None => REFERENCE_YEAR,
        };
        let (ny, nm, nd) = shift(y, month_of(m)?, dd, days)?;
        let mut out = if day_first {
            format!("{} {}", ordinal(nd, suffix), month_like(nm, m))
        } else {
            format!("{} {}", month_like(nm, m), ordinal(nd, suffix))
        };
        if let Some(like) = year_word {
            out.push_str(if comma && !day_first { ", " } else { " " });
            out.push_str(&year_like(ny, like));
        }
        return Some(out);
    }
    match words.as_slice() {
        // `March 2019`
        [m, y] if month_of(m).is_some() => {
            let (ny, nm, _) = shift(full_year(y)?, month_of(m)?, 15, days)?;
            Some(format!(
                "{}{}{}",
                month_like(nm, m),
                if comma { ", " } else { " " },
                year_like(ny, y)
            ))
        }
        // `November`
        [m] if month_of(m).is_some() && m.len() >= 3 => {
            let (_, nm, _) = shift(REFERENCE_YEAR, month_of(m)?, 15, days)?;
            Some(month_like(nm, m))
        }
        _ => None,
    }
}

fn weekday(t: &str, days: i64) -> Option<String> {
    let lower = t.trim_end_matches('.').to_lowercase();
    let plural = lower.ends_with("days") && lower.len() > 6;
    let stem = if plural {
        &lower[..lower.len() - 1]
    } else {
        &lower[..]
    };
    let i = WEEKDAYS.iter().position(|w| {
        w.to_lowercase() == stem
            || (stem.len() >= 3 && w.to_lowercase().starts_with(stem) && stem.len() <= 5)
    })?;
    let j = (i as i64 + days).rem_euclid(7) as usize;
    let full = WEEKDAYS[j];
    let name = if stem.len() < 6 { &full[..3] } else { full };
    let name = if t
        .chars()
        .filter(|c| c.is_alphabetic())
        .all(char::is_uppercase)
    {
        name.to_uppercase()
    } else if t.chars().next().is_some_and(char::is_lowercase) {
        name.to_lowercase()
    } else {
        name.to_string()
    };
    Some(format!("{name}{}", if plural { "s" } else { "" }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_round_trips() {
        for z in [-800_000, -1, 0, 1, 11_000, 19_000, 800_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(
            days_from_civil(2000, 3, 1) - days_from_civil(2000, 2, 28),
            2
        );
    }

    #[test]
    fn formats_are_kept_and_intervals_too() {
        let cases = [
            ("03/14/2019", 10, "03/24/2019"),
            ("3/14/19", -14, "2/28/19"),
            ("2019-12-25", 7, "2020-01-01"),
            ("14-Mar-2019", 1, "15-Mar-2019"),
            ("March 14, 2019", 30, "April 13, 2019"),
            ("Mar 14 2019", 30, "Apr 13 2019"),
            ("March 14", 30, "April 13"),
            ("14 March 2019", 30, "13 April 2019"),
            ("3/14", 30, "4/13"),
            ("3/80", 31, "4/80"),
            ("8/2019", -31, "7/2019"),
            ("Mar 2019", 31, "Apr 2019"),
            ("November", 31, "December"),
            ("Monday", 2, "Wednesday"),
            ("SATURDAY", 2, "MONDAY"),
            ("Wed", -1, "Tue"),
            ("02/21/2023 14:12", 3, "02/24/2023 14:12"),
            ("March 14, 2019 10:30", 1, "March 15, 2019 10:30"),
            ("March 14, 2019 10:30 am", 366, "March 14, 2020 10:30 am"),
            ("July 4th", 1, "July 5th"),
        ];
        for (input, days, want) in cases {
            assert_eq!(
                shift_date(input, days).as_deref(),
                Some(want),
                "{input} + {days}"
            );
        }
        for bad in ["Christmas", "13/45/2019", "2/30/2019", "10:30", "x/y"] {
            assert_eq!(shift_date(bad, 5), None, "{bad}");
        }
    }
}
