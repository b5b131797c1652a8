//! The report's PNG plots, per scenario: throughput against parallel flows (a line per frame
//! size, OVS's dashed beside it with compare-ovs) and cycles per packet as stacked bars by
//! pipeline stage (OVS's total beside each). Text is drawn with DejaVu Sans built into the
//! binary (`assets/`, Bitstream Vera licence beside it), so that no system font is looked up.

use std::path::{Path, PathBuf};

use anyhow::Context;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::Report;
use super::cell::{Cell, Median};

/// DejaVu Sans (Bitstream Vera licence, `assets/DejaVuSans.LICENSE`).
static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// The font family plotters is given: the plots draw their text themselves ([`Pen`]), but
/// plotters must have a font for what it lays out (empty tick labels).
const SANS: &str = "sans-serif";

/// Plot area background, tick and grid colours.
const GRID: RGBColor = RGBColor(225, 225, 225);

/// Throughput plots' size in pixels.
pub const THROUGHPUT_PLOT: (u32, u32) = (1024, 640);
/// Cycle plots' height; their width is at least 1280, more for many bars.
pub const CYCLES_PLOT_HEIGHT: u32 = 720;
/// The legend column at the right of every plot.
const LEGEND_WIDTH: u32 = 200;

/// Cycle plots' width for `bars` bars.
fn cycles_plot_width(bars: usize) -> u32 {
    1280.max(34 * bars as u32 + 300)
}

/// Line colours (frame sizes), distinguishable from each other.
const LINES: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(127, 127, 127),
];

/// Stage colours in pipeline order (rx, extract, emc, megaflow, upcall, actions, tx), then
/// `other`.
const STAGES: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
    RGBColor(227, 119, 194),
    RGBColor(199, 199, 199),
];

/// OVS's bars.
const OVS: RGBColor = RGBColor(90, 90, 90);

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

fn pe(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("drawing a plot: {e}")
}

/// Draws text with the built-in font. (plotters' own ab_glyph text drops each glyph's left
/// side bearing, which spaces digits unevenly: "57 016".)
struct Pen {
    font: ab_glyph::FontRef<'static>,
}

impl Pen {
    fn new() -> anyhow::Result<Pen> {
        static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let ok = *REGISTERED
            .get_or_init(|| plotters::style::register_font(SANS, FontStyle::Normal, FONT).is_ok());
        let font = ab_glyph::FontRef::try_from_slice(FONT).ok().filter(|_| ok);
        Ok(Pen {
            font: font.context("the built-in font could not be loaded")?,
        })
    }

    /// Draws `s` at `at` (pixels of `area`), `size` pixels high, anchored by `h` and `v`;
    /// `up` turns it a quarter counter-clockwise (read bottom to top).
    #[allow(clippy::too_many_arguments)]
    fn text(
        &self,
        area: &Area,
        s: &str,
        at: (i32, i32),
        size: f32,
        (h, v): (HPos, VPos),
        up: bool,
        color: RGBColor,
    ) -> anyhow::Result<()> {
        use ab_glyph::{Font, ScaleFont};
        let font = self.font.as_scaled(size);
        let height = font.ascent() - font.descent();
        let mut glyphs = Vec::new();
        let mut caret = 0.0f32;
        let mut prev = None;
        for c in s.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                caret += font.kern(p, id);
            }
            glyphs.push(id.with_scale_and_position(size, ab_glyph::point(caret, font.ascent())));
            caret += font.h_advance(id);
            prev = Some(id);
        }
        // Whole pixels: a fractional shift rounded per pixel would skip a row or column
        // where the shifted coordinates cross zero.
        let dx = match h {
            HPos::Left => 0.0,
            HPos::Center => -caret / 2.0,
            HPos::Right => -caret,
        }
        .round() as i32;
        let dy = match v {
            VPos::Top => 0.0,
            VPos::Center => -height / 2.0,
            VPos::Bottom => -height,
        }
        .round() as i32;
        let mut pixels = Vec::new();
        for g in glyphs {
            if let Some(o) = self.font.outline_glyph(g) {
                let b = o.px_bounds();
                o.draw(|x, y, cover| {
                    let tx = b.min.x as i32 + x as i32 + dx;
                    let ty = b.min.y as i32 + y as i32 + dy;
                    pixels.push((tx, ty, cover));
                });
            }
        }
        for (tx, ty, cover) in pixels {
            let p = if up {
                (at.0 + ty, at.1 - tx)
            } else {
                (at.0 + tx, at.1 + ty)
            };
            area.draw_pixel(p, &color.mix(f64::from(cover.min(1.0))))
                .map_err(pe)?;
        }
        Ok(())
    }
}

/// Ticks from 0 to `top` at the round step (1, 2 or 5 times a power of ten) nearest to a
/// sixth of it.
fn ticks(top: f64) -> Vec<f64> {
    let raw = (top / 6.0).max(f64::MIN_POSITIVE);
    let p = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .min_by(|a, b| (a / raw).ln().abs().total_cmp(&(b / raw).ln().abs()))
        .unwrap_or(p);
    (0..)
        .map(|i| i as f64 * step)
        .take_while(|&t| t <= top * (1.0 + 1e-9))
        .collect()
}

/// A tick value as a label: no more decimals than the step needs.
fn tick_label(t: f64, step: f64) -> String {
    let d = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{t:.d$}")
}

pub(super) fn plot_all(r: &Report, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let pen = Pen::new()?;
    let mut files = Vec::new();
    for s in &r.scenarios {
        let p = dir.join(format!("{s}_throughput.png"));
        throughput_plot(&pen, r, s, &p).with_context(|| format!("{}", p.display()))?;
        files.push(p);
        let p = dir.join(format!("{s}_cycles.png"));
        cycles_plot(&pen, r, s, &p).with_context(|| format!("{}", p.display()))?;
        files.push(p);
    }
    Ok(files)
}

/// A legend entry's sample, drawn in the area with its left end at the given point.
type Swatch = Box<dyn Fn(&Area, i32, i32) -> anyhow::Result<()>>;

/// Marks on a line sample.
#[derive(Clone, Copy)]
enum Mark {
    None,
    Dot,
    Triangle,
}

/// A line sample, dashed or solid, with a mark in its middle.
fn line_swatch(color: RGBColor, dashed: bool, mark: Mark) -> Swatch {
    Box::new(move |area, x, y| {
        let dashes: &[(i32, i32)] = if dashed {
            &[(0, 8), (13, 21), (26, 30)]
        } else {
            &[(0, 30)]
        };
        for &(a, b) in dashes {
            area.draw(&PathElement::new(
                vec![(x + a, y), (x + b, y)],
                color.stroke_width(3),
            ))
            .map_err(pe)?;
        }
        match mark {
            Mark::None => Ok(()),
            Mark::Dot => area
                .draw(&Circle::new((x + 15, y), 4, color.filled()))
                .map_err(pe),
            Mark::Triangle => area
                .draw(&TriangleMarker::new((x + 15, y), 6, color.filled()))
                .map_err(pe),
        }
    })
}

/// A filled box sample.
fn box_swatch(color: RGBColor) -> Swatch {
    Box::new(move |area, x, y| {
        area.draw(&Rectangle::new(
            [(x, y - 6), (x + 30, y + 6)],
            color.filled(),
        ))
        .map_err(pe)
    })
}

/// Draws `entries` as a column in `area` (the legend column), under `title`.
fn legend(pen: &Pen, area: &Area, title: &str, entries: &[(Swatch, String)]) -> anyhow::Result<()> {
    let left = (HPos::Left, VPos::Center);
    let mut y = 80;
    pen.text(area, title, (10, y), 16.0, left, false, BLACK)?;
    y += 30;
    for (swatch, label) in entries {
        swatch(area, 10, y)?;
        pen.text(area, label, (50, y), 15.0, left, false, BLACK)?;
        y += 26;
    }
    Ok(())
}

/// The labels of a chart drawn on `root`: title above `plot` (the plotting area's corners in
/// pixels), axis descriptions below and left of it.
fn titles(
    pen: &Pen,
    root: &Area,
    plot: ((i32, i32), (i32, i32)),
    title: &str,
    x_desc: &str,
    y_desc: &str,
) -> anyhow::Result<()> {
    let ((x0, y0), (x1, y1)) = plot;
    let center = (HPos::Center, VPos::Center);
    pen.text(root, title, ((x0 + x1) / 2, 24), 21.0, center, false, BLACK)?;
    pen.text(
        root,
        x_desc,
        ((x0 + x1) / 2, y1 + 62),
        16.0,
        center,
        false,
        BLACK,
    )?;
    pen.text(
        root,
        y_desc,
        (x0 - 66, (y0 + y1) / 2),
        16.0,
        center,
        true,
        BLACK,
    )?;
    Ok(())
}

/// Grid lines across the plotting area `plot` at the pixel rows `ys` and columns `xs`, with
/// tick marks, and the two axes.
fn grid(root: &Area, plot: ((i32, i32), (i32, i32)), ys: &[i32], xs: &[i32]) -> anyhow::Result<()> {
    let ((x0, y0), (x1, y1)) = plot;
    let line = |a: (i32, i32), b: (i32, i32), c: RGBColor| {
        root.draw(&PathElement::new(vec![a, b], c.stroke_width(1)))
            .map_err(pe)
    };
    for &y in ys {
        line((x0, y), (x1, y), GRID)?;
        line((x0 - 5, y), (x0, y), BLACK)?;
    }
    for &x in xs {
        line((x, y0), (x, y1), GRID)?;
        line((x, y1), (x, y1 + 5), BLACK)?;
    }
    line((x0, y0), (x0, y1), BLACK)?;
    line((x0, y1), (x1, y1), BLACK)
}

/// The y axis' tick labels, left of the plotting area at each tick's height.
fn y_tick_labels(
    pen: &Pen,
    root: &Area,
    ticks: &[f64],
    at: impl Fn(f64) -> (i32, i32),
) -> anyhow::Result<()> {
    let step = if ticks.len() > 1 {
        ticks[1] - ticks[0]
    } else {
        1.0
    };
    for &t in ticks {
        let (x, y) = at(t);
        let l = tick_label(t, step);
        pen.text(
            root,
            &l,
            (x - 8, y),
            14.0,
            (HPos::Right, VPos::Center),
            false,
            BLACK,
        )?;
    }
    Ok(())
}

/// "n runs" for titles.
fn runs_text(cells: &[&Cell]) -> String {
    match cells.iter().map(|c| c.runs.len()).max().unwrap_or(0) {
        1 => "1 run".to_owned(),
        n => format!("median of {n} runs"),
    }
}

/// Throughput (Mpps) against parallel flows, a line per frame size (and with compare-ovs a
/// dashed one for OVS).
fn throughput_plot(pen: &Pen, r: &Report, s: &str, path: &Path) -> anyhow::Result<()> {
    let (w, h) = THROUGHPUT_PLOT;
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(pe)?;
    let (area, side) = root.split_horizontally(w - LEGEND_WIDTH);
    let cells: Vec<&Cell> = r.cells.iter().filter(|c| c.scenario == s).collect();
    let ovs = |c: &Cell| c.compare_ovs.as_ref().and_then(|x| x.ovs.mpps);
    let compare = cells.iter().any(|c| c.compare_ovs.is_some());
    let top = cells
        .iter()
        .flat_map(|c| [c.median.as_ref().map(|m| m.mpps), ovs(c)])
        .flatten()
        .fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.12 } else { 1.0 };
    let y_ticks = ticks(top);
    let flows: Vec<f64> = r.flows.iter().map(|&n| n as f64).collect();
    let (lo, hi) = (flows[0] / 2.0, flows[flows.len() - 1] * 2.0);
    let mut chart = ChartBuilder::on(&area)
        .margin_top(50)
        .margin_right(20)
        .x_label_area_size(80)
        .y_label_area_size(90)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..top)
        .map_err(pe)?;
    let plot = (
        chart.backend_coord(&(lo, top)),
        chart.backend_coord(&(hi, 0.0)),
    );
    let ys: Vec<i32> = y_ticks
        .iter()
        .map(|&t| chart.backend_coord(&(lo, t)).1)
        .collect();
    let xs: Vec<i32> = flows
        .iter()
        .map(|&f| chart.backend_coord(&(f, 0.0)).0)
        .collect();
    grid(&root, plot, &ys, &xs)?;
    titles(
        pen,
        &root,
        plot,
        &format!("{s}: throughput vs parallel flows ({})", runs_text(&cells)),
        "parallel flows (log scale)",
        "Mpps",
    )?;
    y_tick_labels(pen, &root, &y_ticks, |t| chart.backend_coord(&(lo, t)))?;
    for &f in &flows {
        let (x, y) = chart.backend_coord(&(f, 0.0));
        pen.text(
            &root,
            &flows_label(f),
            (x, y + 10),
            14.0,
            (HPos::Center, VPos::Top),
            false,
            BLACK,
        )?;
    }
    let mut entries: Vec<(Swatch, String)> = Vec::new();
    for (i, &z) in r.frame_sizes.iter().enumerate() {
        let color = LINES[i % LINES.len()];
        let row: Vec<&&Cell> = cells.iter().filter(|c| c.frame_size == z).collect();
        let pts: Vec<(f64, f64)> = row
            .iter()
            .filter_map(|c| c.median.as_ref().map(|m| (c.flows as f64, m.mpps)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(pe)?;
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(pe)?;
        if compare {
            let o: Vec<(f64, f64)> = row
                .iter()
                .filter_map(|c| ovs(c).map(|v| (c.flows as f64, v)))
                .collect();
            chart
                .draw_series(DashedLineSeries::new(
                    o.clone(),
                    8,
                    5,
                    color.stroke_width(2),
                ))
                .map_err(pe)?;
            chart
                .draw_series(o.iter().map(|&p| TriangleMarker::new(p, 6, color.filled())))
                .map_err(pe)?;
        }
        let na = row.iter().filter(|c| c.median.is_none()).count();
        let ovs_na = row.iter().filter(|c| compare && ovs(c).is_none()).count();
        let label = match (na, ovs_na) {
            (0, 0) => format!("{z} B"),
            (na, 0) => format!("{z} B ({na} n/a)"),
            (0, o) => format!("{z} B (OVS {o} n/a)"),
            (na, o) => format!("{z} B ({na} n/a, OVS {o})"),
        };
        entries.push((line_swatch(color, false, Mark::None), label));
    }
    if compare {
        entries.push((line_swatch(BLACK, false, Mark::Dot), "flowpath".to_owned()));
        entries.push((
            line_swatch(BLACK, true, Mark::Triangle),
            "OVS-DPDK".to_owned(),
        ));
    }
    legend(pen, &side, "frame size", &entries)?;
    root.present().map_err(pe)?;
    Ok(())
}

/// Cycles per packet by stage, a stacked bar per cell (grouped by frame size), with
/// compare-ovs OVS's total beside each.
fn cycles_plot(pen: &Pen, r: &Report, s: &str, path: &Path) -> anyhow::Result<()> {
    let cells: Vec<&Cell> = r.cells.iter().filter(|c| c.scenario == s).collect();
    let compare = cells.iter().any(|c| c.compare_ovs.is_some());
    let ovs = |c: &Cell| c.compare_ovs.as_ref().and_then(|x| x.ovs.cycles_per_packet);
    let n = cells.len();
    let w = cycles_plot_width(n * if compare { 2 } else { 1 });
    let h = CYCLES_PLOT_HEIGHT;
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(pe)?;
    let (area, side) = root.split_horizontally(w - LEGEND_WIDTH);
    let top = cells
        .iter()
        .flat_map(|c| {
            [
                c.median
                    .as_ref()
                    .map(|m| m.cycles_per_packet.max(stacked(m))),
                ovs(c),
            ]
        })
        .flatten()
        .fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.1 } else { 1.0 };
    let y_ticks = ticks(top);
    let right = n.max(1) as f64;
    let mut chart = ChartBuilder::on(&area)
        .margin_top(50)
        .margin_right(20)
        .x_label_area_size(80)
        .y_label_area_size(90)
        .build_cartesian_2d(0f64..right, 0f64..top)
        .map_err(pe)?;
    let plot = (
        chart.backend_coord(&(0.0, top)),
        chart.backend_coord(&(right, 0.0)),
    );
    let ys: Vec<i32> = y_ticks
        .iter()
        .map(|&t| chart.backend_coord(&(0.0, t)).1)
        .collect();
    grid(&root, plot, &ys, &[])?;
    titles(
        pen,
        &root,
        plot,
        &format!("{s}: cycles per packet by stage ({})", runs_text(&cells)),
        "parallel flows, grouped by frame size",
        "TSC cycles per packet",
    )?;
    y_tick_labels(pen, &root, &y_ticks, |t| chart.backend_coord(&(0.0, t)))?;
    let above = (HPos::Center, VPos::Bottom);
    // A figure above a bar (or n/a on the axis), `x` its centre.
    let value = |x: f64, v: Option<f64>| -> anyhow::Result<()> {
        let (px, py) = chart.backend_coord(&(x, v.unwrap_or(0.0)));
        let t = v.map_or("n/a".to_owned(), |v| format!("{v:.0}"));
        pen.text(&root, &t, (px, py - 3), 12.0, above, false, BLACK)
    };
    for (i, c) in cells.iter().enumerate() {
        let x = i as f64;
        let (a, b) = if compare {
            (x + 0.08, x + 0.48)
        } else {
            (x + 0.2, x + 0.8)
        };
        if let Some(m) = &c.median {
            let mut y = 0.0;
            let parts = m
                .stage_cycles_per_packet
                .iter()
                .map(|s| s.1)
                .chain([m.other_cycles_per_packet]);
            for (k, v) in parts.enumerate() {
                let color = STAGES[k.min(STAGES.len() - 1)];
                chart
                    .plotting_area()
                    .draw(&Rectangle::new([(a, y), (b, y + v)], color.filled()))
                    .map_err(pe)?;
                y += v;
            }
            chart
                .plotting_area()
                .draw(&Rectangle::new([(a, 0.0), (b, y)], BLACK.stroke_width(1)))
                .map_err(pe)?;
        }
        value(
            (a + b) / 2.0,
            c.median.as_ref().map(|m| m.cycles_per_packet),
        )?;
        if compare {
            let (a, b) = (x + 0.52, x + 0.92);
            if let Some(v) = ovs(c) {
                chart
                    .plotting_area()
                    .draw(&Rectangle::new([(a, 0.0), (b, v)], OVS.filled()))
                    .map_err(pe)?;
            }
            value((a + b) / 2.0, ovs(c))?;
        }
    }
    // The x labels: flows under each cell, the frame size under each group, lines between
    // groups.
    let under = (HPos::Center, VPos::Top);
    let mut i = 0;
    while i < n {
        let z = cells[i].frame_size;
        let j = i + cells[i..].iter().take_while(|c| c.frame_size == z).count();
        for (k, c) in cells[i..j].iter().enumerate() {
            let (px, py) = chart.backend_coord(&((i + k) as f64 + 0.5, 0.0));
            pen.text(
                &root,
                &flows_label(c.flows as f64),
                (px, py + 8),
                14.0,
                under,
                false,
                BLACK,
            )?;
        }
        let (px, py) = chart.backend_coord(&((i + j) as f64 / 2.0, 0.0));
        pen.text(
            &root,
            &format!("{z} B"),
            (px, py + 30),
            15.0,
            under,
            false,
            BLACK,
        )?;
        if i > 0 {
            chart
                .draw_series(LineSeries::new(
                    [(i as f64, 0.0), (i as f64, top)],
                    RGBColor(150, 150, 150).stroke_width(1),
                ))
                .map_err(pe)?;
        }
        i = j;
    }
    // Legend, top of the stack first.
    let names: Vec<String> = cells
        .iter()
        .find_map(|c| c.median.as_ref())
        .map(|m| {
            m.stage_cycles_per_packet
                .iter()
                .map(|s| s.0.clone())
                .collect()
        })
        .unwrap_or_else(|| {
            datapath::pmd::Stage::ALL
                .iter()
                .map(|s| s.name().to_owned())
                .collect()
        });
    let mut entries: Vec<(Swatch, String)> = Vec::new();
    let labels: Vec<String> = names.into_iter().chain(["other".to_owned()]).collect();
    for (k, l) in labels.iter().enumerate().rev() {
        entries.push((box_swatch(STAGES[k.min(STAGES.len() - 1)]), l.clone()));
    }
    if compare {
        entries.push((box_swatch(OVS), "OVS-DPDK total".to_owned()));
    }
    let title = if compare { "flowpath stage" } else { "stage" };
    legend(pen, &side, title, &entries)?;
    root.present().map_err(pe)?;
    Ok(())
}

/// The height of a cell's stacked bar.
fn stacked(m: &Median) -> f64 {
    m.stage_cycles_per_packet.iter().map(|s| s.1).sum::<f64>() + m.other_cycles_per_packet
}

fn flows_label(n: f64) -> String {
    let n = n.round();
    if n >= 1e6 && n % 1e6 == 0.0 {
        format!("{}M", n / 1e6)
    } else if n >= 1e3 && n % 1e3 == 0.0 {
        format!("{}k", n / 1e3)
    } else {
        format!("{n}")
    }
}
