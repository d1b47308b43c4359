//! A report's table on stdout, its CSV and its plots.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use dptext_core::cost::Guarantee;
use dptext_core::detect::Label;

use super::plot::{self, Plot, Series};
use super::tokens::P0;
use super::Row;

/// What the whole report was measured on.
#[derive(Debug, Clone)]
pub struct Header {
    /// The input, in words.
    pub source: String,
    /// Values in the sample.
    pub values: usize,
    /// Non-empty values the sample was drawn from.
    pub read: usize,
    /// The seed.
    pub seed: u64,
    /// Query Attack: outputs per value.
    pub queries: usize,
    /// Query Attack: values attacked.
    pub attack_values: usize,
    /// The classifier trained on originals (with labels).
    pub baseline: Option<f64>,
    /// Seconds for the whole run.
    pub seconds: f64,
}

/// A guarantee in a few words.
pub fn guarantee(g: &Guarantee) -> String {
    match g {
        Guarantee::MetricLdp { eps } => format!("{eps}/distance (mLDP)"),
        Guarantee::Umldp { eps, eps0 } => format!("{eps}/distance+{eps0:.2} (UMLDP)"),
        Guarantee::Dp { eps } => format!("{eps}/word (DP)"),
        Guarantee::Replacement { eps, p } => format!("{eps:.2}/span (p={p})"),
        Guarantee::None { .. } => "none".to_string(),
    }
}

fn pct(x: f64) -> String {
    if x.is_nan() {
        "-".to_string()
    } else {
        format!("{:.1}%", 100.0 * x)
    }
}

fn num(x: f64) -> String {
    if x.is_nan() {
        "-".to_string()
    } else if x.is_infinite() {
        "inf".to_string()
    } else if x >= 1000.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// The table on stdout.
pub fn table(out: &mut impl Write, h: &Header, rows: &[Row]) -> Result<()> {
    writeln!(
        out,
        "dptext eval: {} values of {} (from {}), seed {}, {:.0} s",
        h.values, h.source, h.read, h.seed, h.seconds
    )?;
    if let Some(b) = h.baseline {
        writeln!(
            out,
            "classifier trained on originals: {} accuracy on the original test values",
            pct(b)
        )?;
    }
    if h.queries > 0 {
        writeln!(
            out,
            "Query Attack: {} outputs of each of {} values, majority vote per word",
            h.queries, h.attack_values
        )?;
    }
    let head = [
        "mechanism",
        "param",
        "eps/token",
        "worst/value",
        "unchanged",
        "pii kept",
        "similarity",
        "clf",
        "QA fresh",
        "QA key",
    ];
    let body: Vec<[String; 10]> = rows
        .iter()
        .map(|r| {
            [
                r.config.series.clone(),
                r.config.point.clone(),
                r.guarantee.clone(),
                num(r.worst.0),
                pct(r.unchanged()),
                pct(r.pii_kept()),
                format!("{:.3}", r.similarity.0),
                r.classifier.map_or_else(|| "-".to_string(), pct),
                r.attack.map_or_else(|| "-".to_string(), |a| pct(a.0)),
                r.attack.map_or_else(|| "-".to_string(), |a| pct(a.1)),
            ]
        })
        .collect();
    let mut width = head.map(str::len);
    for b in &body {
        for (w, c) in width.iter_mut().zip(b) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        cells
            .iter()
            .zip(width)
            .enumerate()
            .map(|(i, (c, w))| {
                if i < 3 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    writeln!(out, "{}", line(&head.map(str::to_string)))?;
    for b in &body {
        writeln!(out, "{}", line(b))?;
    }
    let labels = labels(rows);
    if !labels.is_empty() {
        writeln!(out, "PII words kept verbatim, per label:")?;
        for r in rows {
            let parts: Vec<String> = labels
                .iter()
                .map(|l| {
                    let (n, k) = r.pii.get(l).copied().unwrap_or((0, 0));
                    format!("{} {}", l.as_str(), pct(super::ratio(k, n)))
                })
                .collect();
            writeln!(
                out,
                "  {} {}: {}",
                r.config.series,
                r.config.point,
                parts.join(", ")
            )?;
        }
    }
    Ok(())
}

fn labels(rows: &[Row]) -> Vec<Label> {
    rows.iter()
        .flat_map(|r| r.pii.keys().copied())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Every figure of every row, one row per configuration.
pub fn csv(path: &Path, h: &Header, rows: &[Row]) -> Result<()> {
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("writing {}", path.display()))?;
    let labels = labels(rows);
    let mut head: Vec<String> = [
        "series",
        "mechanism",
        "params",
        "eps",
        "guarantee",
        "worst_case_eps_median",
        "worst_case_eps_max",
        "values",
        "words",
        "unchanged_share",
        "pii_words",
        "pii_kept_share",
    ]
    .map(str::to_string)
    .to_vec();
    head.extend(labels.iter().map(|l| format!("pii_kept_{}", l.as_str())));
    head.extend(
        [
            "similarity_mean",
            "similarity_p10",
            "classifier_accuracy",
            "classifier_baseline",
            "query_attack_queries",
            "query_attack_fresh",
            "query_attack_keyed",
            "seconds",
        ]
        .map(str::to_string),
    );
    w.write_record(&head)?;
    let f = |x: f64| {
        if x.is_nan() {
            String::new()
        } else {
            format!("{x:.6}")
        }
    };
    for r in rows {
        let pii_n: usize = r.pii.values().map(|p| p.0).sum();
        let mut rec: Vec<String> = vec![
            r.config.series.clone(),
            r.config.spec.name().to_string(),
            r.config.spec.params_json().to_string(),
            r.config.eps.map(|e| e.to_string()).unwrap_or_default(),
            r.guarantee.clone(),
            f(r.worst.0),
            f(r.worst.1),
            h.values.to_string(),
            r.words.0.to_string(),
            f(r.unchanged()),
            pii_n.to_string(),
            f(r.pii_kept()),
        ];
        for l in &labels {
            let (n, k) = r.pii.get(l).copied().unwrap_or((0, 0));
            rec.push(f(super::ratio(k, n)));
        }
        rec.push(f(r.similarity.0));
        rec.push(f(r.similarity.1));
        rec.push(r.classifier.map(f).unwrap_or_default());
        rec.push(h.baseline.map(f).unwrap_or_default());
        rec.push(h.queries.to_string());
        rec.push(r.attack.map(|a| f(a.0)).unwrap_or_default());
        rec.push(r.attack.map(|a| f(a.1)).unwrap_or_default());
        rec.push(format!("{:.2}", r.seconds));
        w.write_record(&rec)?;
    }
    w.flush()?;
    Ok(())
}

/// The p_0 table on stdout.
pub fn p0_table(out: &mut impl Write, p0: &[P0], draws: usize) -> Result<()> {
    writeln!(
        out,
        "p0 (word left unchanged) and distinct outputs, {draws} draws per word:"
    )?;
    for p in p0 {
        writeln!(
            out,
            "  {} {} {:>12}: p0 {:>6}  distinct {}",
            p.series,
            p.point,
            p.word,
            pct(p.p0),
            p.distinct
        )?;
    }
    Ok(())
}

/// The p_0 figures as CSV.
pub fn p0_csv(path: &Path, p0: &[P0]) -> Result<()> {
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("writing {}", path.display()))?;
    w.write_record(["series", "point", "word", "p0", "distinct"])?;
    for p in p0 {
        w.write_record([
            p.series.as_str(),
            p.point.as_str(),
            p.word.as_str(),
            &format!("{:.6}", p.p0),
            &p.distinct.to_string(),
        ])?;
    }
    w.flush()?;
    Ok(())
}

/// One line per series, y against x, points labelled by their parameter.
fn series(rows: &[Row], x: impl Fn(&Row) -> f64, y: impl Fn(&Row) -> f64) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in rows {
        let (px, py) = (x(r), y(r));
        if !px.is_finite() || !py.is_finite() {
            continue;
        }
        let point = (px, py, r.config.point.clone());
        match out.iter_mut().find(|s| s.name == r.config.series) {
            Some(s) => s.points.push(point),
            None => {
                let color = out.len();
                out.push(Series {
                    name: r.config.series.clone(),
                    points: vec![point],
                    color,
                    dashed: false,
                });
            }
        }
    }
    out
}

/// Draws the plots the rows allow; returns the files written.
pub fn plots(dir: &Path, rows: &[Row], baseline: Option<f64>) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let sim = |r: &Row| r.similarity.0;
    let unchanged = |r: &Row| r.unchanged();
    let mut draw_within = |name: &str,
                           title: &str,
                           x_label: &str,
                           y_label: &str,
                           s: Vec<Series>,
                           x_bounds: (f64, f64)|
     -> Result<()> {
        if s.is_empty() {
            return Ok(());
        }
        let xs = s.iter().flat_map(|s| s.points.iter().map(|p| p.0));
        let ys = s.iter().flat_map(|s| s.points.iter().map(|p| p.1));
        let p = Plot {
            title,
            x_label,
            y_label,
            x_range: plot::range(xs, x_bounds.0, x_bounds.1),
            y_range: plot::range(ys, -1.0, 1.0),
        };
        let path = dir.join(name);
        plot::draw(&path, &p, &s)?;
        written.push(path);
        Ok(())
    };
    // Utility against eps itself, one line per mechanism: where the choice
    // of eps is made, read off an axis rather than point labels.
    let eps = |r: &Row| r.config.eps.unwrap_or(f64::NAN);
    let mut by_eps = series(rows, eps, sim);
    for s in &mut by_eps {
        for p in &mut s.points {
            p.2.clear();
        }
    }
    by_eps.retain(|s| s.points.len() > 1);
    draw_within(
        "utility_by_eps.png",
        "Utility against eps (each mechanism's own eps: not comparable across mechanisms)",
        "eps",
        "similarity to the original (sentence encoder cosine)",
        by_eps,
        (0.0, f64::INFINITY),
    )?;
    let mut draw = |name: &str, title: &str, x_label: &str, y_label: &str, s: Vec<Series>| {
        draw_within(name, title, x_label, y_label, s, (0.0, 1.0))
    };
    draw(
        "privacy_utility.png",
        "Utility against words left unchanged",
        "words left unchanged (N_x; lower is more private)",
        "similarity to the original (sentence encoder cosine)",
        series(rows, unchanged, sim),
    )?;
    draw(
        "pii_utility.png",
        "Utility against PII left verbatim",
        "detected PII words kept verbatim (lower is more private)",
        "similarity to the original (sentence encoder cosine)",
        series(rows, Row::pii_kept, sim),
    )?;
    if rows.iter().any(|r| r.classifier.is_some()) {
        let title = match baseline {
            Some(b) => format!(
                "Classifier trained on sanitized values (trained on originals: {})",
                pct(b)
            ),
            None => "Classifier trained on sanitized values".to_string(),
        };
        draw(
            "classifier.png",
            &title,
            "words left unchanged (N_x; lower is more private)",
            "accuracy on original test values",
            series(rows, unchanged, |r| r.classifier.unwrap_or(f64::NAN)),
        )?;
    }
    if rows.iter().any(|r| r.attack.is_some()) {
        let mut s = series(rows, unchanged, |r| r.attack.map_or(f64::NAN, |a| a.0));
        for x in &mut s {
            x.name.push_str(" (fresh)");
        }
        // Keyed: the same colour as the mechanism's fresh line, dashed.
        let mut keyed = series(rows, unchanged, |r| r.attack.map_or(f64::NAN, |a| a.1));
        for x in &mut keyed {
            x.name.push_str(" (keyed)");
            x.dashed = true;
            for p in &mut x.points {
                p.2.clear();
            }
        }
        s.extend(keyed);
        draw(
            "query_attack.png",
            "Query Attack: words recovered by a majority vote (dashed: keyed)",
            "words left unchanged by one output (N_x)",
            "words recovered from repeated outputs",
            s,
        )?;
    }
    Ok(written)
}
