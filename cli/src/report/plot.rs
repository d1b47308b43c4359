//! PNG plots of a report, drawn in Rust with `plotters`: one line per
//! mechanism, each point marked with its parameter (eps).
//!
//! Text needs a TrueType font: `$DPTEXT_FONT`, else DejaVu Sans or
//! Liberation Sans where Debian's font packages put them (`scripts/setup.sh`
//! installs `fonts-dejavu-core`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Context, Result};
use plotters::prelude::*;

/// Environment variable naming a TrueType font for the plots' text.
pub const FONT_ENV: &str = "DPTEXT_FONT";

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

/// Line colours that stay apart on white (the Tableau 10 set).
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One line of a plot.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend entry (mechanism and fixed parameters).
    pub name: String,
    /// (x, y, the point's label), in drawing order.
    pub points: Vec<(f64, f64, String)>,
    /// Its colour's index (lines of one mechanism share one).
    pub color: usize,
    /// Drawn dashed (a second measure of the same mechanism).
    pub dashed: bool,
}

/// What a plot shows.
#[derive(Debug, Clone)]
pub struct Plot<'a> {
    /// Title over the chart.
    pub title: &'a str,
    /// Axis captions.
    pub x_label: &'a str,
    /// Axis captions.
    pub y_label: &'a str,
    /// The x range (the y range too when `y_range` is `None`).
    pub x_range: (f64, f64),
    /// The y range.
    pub y_range: (f64, f64),
}

/// Registers the font once per process; the error says how to get one.
fn font() -> Result<()> {
    static DONE: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let candidates: Vec<PathBuf> = std::env::var_os(FONT_ENV)
            .map(PathBuf::from)
            .into_iter()
            .chain(FONT_PATHS.iter().map(PathBuf::from))
            .collect();
        let Some(path) = candidates.iter().find(|p| p.is_file()) else {
            return Err(format!(
                "no TrueType font for the plots' text: install fonts-dejavu-core (Debian) or set ${FONT_ENV} to a .ttf file (looked in {})",
                FONT_PATHS.join(", ")
            ));
        };
        let bytes = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        // plotters keeps registered fonts for the life of the process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("{} is not a TrueType font", path.display()))?;
        Ok(path.clone())
    })
    .as_ref()
    .map(|_| ())
    .map_err(|e| anyhow!("{e}"))
}

/// Draws `series` into a PNG at `path`.
pub fn draw(path: &Path, plot: &Plot<'_>, series: &[Series]) -> Result<()> {
    font()?;
    if series.iter().all(|s| s.points.is_empty()) {
        bail!("nothing to plot in {}", path.display());
    }
    let root = BitMapBackend::new(path, (1000, 680)).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| anyhow!("drawing {}: {e}", path.display());
    root.fill(&WHITE).map_err(err)?;
    let (x0, x1) = plot.x_range;
    let (y0, y1) = plot.y_range;
    let mut chart = ChartBuilder::on(&root)
        .caption(plot.title, ("sans-serif", 26))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(plot.x_label)
        .y_desc(plot.y_label)
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .draw()
        .map_err(err)?;
    // Point labels already drawn, in pixels: a label that would overlap
    // one is left out (its point stays; the table has every figure).
    let mut taken: Vec<(i32, i32, i32)> = Vec::new();
    for s in series {
        let color = COLORS[s.color % COLORS.len()].to_rgba();
        let line: Vec<(f64, f64)> = s.points.iter().map(|(x, y, _)| (*x, *y)).collect();
        let drawn = if s.dashed {
            chart.draw_series(DashedLineSeries::new(
                line.clone(),
                8,
                5,
                color.stroke_width(2),
            ))
        } else {
            chart.draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
        };
        let dashed = s.dashed;
        drawn
            .map_err(err)?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                if dashed {
                    PathElement::new(vec![(x, y), (x + 8, y)], color.stroke_width(3))
                } else {
                    PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
                }
            });
        let mut labels: Vec<String> = Vec::with_capacity(s.points.len());
        for (x, y, t) in &s.points {
            let (px, py) = chart.backend_coord(&(*x, *y));
            let width = 8 * i32::try_from(t.chars().count()).unwrap_or(i32::MAX / 16);
            let free = !t.is_empty()
                && !taken.iter().any(|&(ax, ay, aw)| {
                    px < ax + aw + 4 && ax < px + width + 4 && (py - ay).abs() < 16
                });
            if free {
                taken.push((px, py, width));
            }
            labels.push(if free { t.clone() } else { String::new() });
        }
        chart
            .draw_series(s.points.iter().zip(labels).map(|((x, y, _), t)| {
                EmptyElement::at((*x, *y))
                    + Circle::new((0, 0), 5, color.filled())
                    + Text::new(t, (7, -18), ("sans-serif", 14).into_font().color(&color))
            }))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 16))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(err)?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// A range over `values` with a margin, within `[lo, hi]`.
pub fn range(values: impl Iterator<Item = f64>, lo: f64, hi: f64) -> (f64, f64) {
    let (mut a, mut b) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        a = a.min(v);
        b = b.max(v);
    }
    if !a.is_finite() {
        return (lo, hi);
    }
    let pad = ((b - a) * 0.08).max(0.02);
    ((a - pad).max(lo), (b + pad).min(hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_png() {
        if font().is_err() {
            eprintln!("SKIPPED: no font on this machine");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.png");
        let series = vec![
            Series {
                name: "santext".into(),
                points: vec![(0.1, 0.5, "eps=1".into()), (0.4, 0.8, "eps=3".into())],
                color: 0,
                dashed: false,
            },
            Series {
                name: "santext (keyed)".into(),
                points: vec![(0.1, 0.4, "eps=1".into()), (0.4, 0.6, "eps=3".into())],
                color: 0,
                dashed: true,
            },
        ];
        let plot = Plot {
            title: "t",
            x_label: "x",
            y_label: "y",
            x_range: (0.0, 1.0),
            y_range: (0.0, 1.0),
        };
        draw(&path, &plot, &series).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert!(bytes.len() > 5_000, "{}", bytes.len());
        let empty = vec![Series {
            name: "x".into(),
            points: vec![],
            color: 0,
            dashed: false,
        }];
        assert!(draw(&path, &plot, &empty).is_err());
    }

    #[test]
    fn ranges_pad_and_clamp() {
        assert_eq!(range([].into_iter(), 0.0, 1.0), (0.0, 1.0));
        let (a, b) = range([0.5, 0.6].into_iter(), 0.0, 1.0);
        assert!(a < 0.5 && b > 0.6 && a >= 0.0 && b <= 1.0);
        assert_eq!(range([0.0, 1.0].into_iter(), 0.0, 1.0), (0.0, 1.0));
    }
}
