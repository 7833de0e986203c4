//! The B3 chart: wait time per lock() call as a percentile distribution
//! (HdrHistogram style: x = percentile on a log scale of 1/(1−p), so the
//! tail gets room; y = wait on a log scale), one panel per (K, hold), one
//! line per variant. Hand-written SVG: no plotting dependency.

use std::fmt::Write as _;
use std::time::Duration;

use crate::timing::fmt_duration;
use crate::workloads::b3::Row;
use crate::workloads::contender::Waiter;

const PANEL_W: f64 = 330.0;
const PANEL_H: f64 = 230.0;
const LEFT: f64 = 62.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 42.0;
const HEADER: f64 = 64.0;
/// Right end of the x axis: the 99.99th percentile.
const X_NINES: f64 = 4.0;

fn color(w: Waiter) -> &'static str {
    match w {
        Waiter::Hashlock | Waiter::HashlockKeepalive => "#1f5fbf",
        Waiter::Redisson => "#d62728",
        Waiter::Poll(d) if d <= Duration::from_millis(1) => "#2ca02c",
        Waiter::Poll(_) => "#ff8c00",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// "10 µs", "1 ms", "100 ms", "1 s" for a power of ten of nanoseconds.
fn decade_label(ns: f64) -> String {
    let e = ns.log10().round() as i32;
    let (unit, base) = match e {
        ..=2 => ("ns", 0),
        3..=5 => ("µs", 3),
        6..=8 => ("ms", 6),
        _ => ("s", 9),
    };
    format!("{} {unit}", 10i64.pow((e - base).max(0) as u32))
}

pub fn b3_wait_chart(rows: &[Row], ks: &[usize], holds: &[Duration]) -> String {
    // One y range for every panel, so panels compare: decades from the
    // smallest p0 to the largest max.
    let mut lo = f64::MAX;
    let mut hi: f64 = 1.0;
    for r in rows.iter().filter(|r| !r.wait.is_empty()) {
        lo = lo.min(r.wait.min().max(1) as f64);
        hi = hi.max(r.wait.max() as f64);
    }
    if lo == f64::MAX {
        lo = 1_000.0;
    }
    let y_lo = 10f64.powf(lo.log10().floor());
    let y_hi = 10f64.powf(hi.log10().ceil().max(y_lo.log10() + 1.0));

    let width = LEFT + RIGHT + PANEL_W * holds.len() as f64;
    let height = HEADER + PANEL_H * ks.len() as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="18" font-size="14" font-weight="bold">B3 — wait per lock() call, percentile distribution (log scales)</text>"#,
        LEFT
    );
    // Legend.
    let mut lx = LEFT;
    for w in Waiter::ALL {
        let _ = writeln!(
            s,
            r#"<line x1="{lx:.0}" y1="38" x2="{:.0}" y2="38" stroke="{}" stroke-width="3"/><text x="{:.0}" y="42">{}</text>"#,
            lx + 22.0,
            color(w),
            lx + 27.0,
            escape(&w.label())
        );
        lx += 40.0 + 6.2 * w.label().len() as f64;
    }

    for (ri, &k) in ks.iter().enumerate() {
        for (ci, &hold) in holds.iter().enumerate() {
            let ox = LEFT + PANEL_W * ci as f64;
            let oy = HEADER + PANEL_H * ri as f64;
            let (pw, ph) = (PANEL_W - RIGHT - 40.0, PANEL_H - TOP - BOTTOM);
            let px = |nines: f64| ox + 10.0 + pw * (nines / X_NINES);
            let py = |ns: f64| {
                let f = (ns.max(y_lo).log10() - y_lo.log10()) / (y_hi.log10() - y_lo.log10());
                oy + TOP + ph * (1.0 - f.clamp(0.0, 1.0))
            };
            let _ = writeln!(
                s,
                r#"<text x="{:.0}" y="{:.0}" font-weight="bold">K = {k}, hold {}</text>"#,
                ox + 10.0,
                oy + TOP - 8.0,
                escape(&fmt_duration(hold))
            );
            let _ = writeln!(
                s,
                r##"<rect x="{:.0}" y="{:.0}" width="{pw:.0}" height="{ph:.0}" fill="none" stroke="#999"/>"##,
                ox + 10.0,
                oy + TOP
            );
            // y grid: decades.
            let mut d = y_lo;
            while d <= y_hi * 1.0001 {
                let y = py(d);
                let _ = writeln!(
                    s,
                    r##"<line x1="{:.0}" y1="{y:.1}" x2="{:.0}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.0}" y="{:.1}" text-anchor="end" fill="#555">{}</text>"##,
                    ox + 10.0,
                    ox + 10.0 + pw,
                    ox + 6.0,
                    y + 4.0,
                    decade_label(d)
                );
                d *= 10.0;
            }
            // x grid: 0 %, 90 %, 99 %, 99.9 %, 99.99 %.
            for (n, label) in [
                (0.0, "0%"),
                (1.0, "90%"),
                (2.0, "99%"),
                (3.0, "99.9%"),
                (4.0, "99.99%"),
            ] {
                let x = px(n);
                let _ = writeln!(
                    s,
                    r##"<line x1="{x:.1}" y1="{:.0}" x2="{x:.1}" y2="{:.0}" stroke="#e4e4e4"/><text x="{x:.1}" y="{:.0}" text-anchor="middle" fill="#555">{label}</text>"##,
                    oy + TOP,
                    oy + TOP + ph,
                    oy + TOP + ph + 14.0
                );
            }
            for w in Waiter::ALL {
                let Some(r) = rows
                    .iter()
                    .find(|r| r.config.waiter == w && r.config.k == k && r.config.hold == hold)
                else {
                    continue;
                };
                if r.wait.is_empty() {
                    continue;
                }
                // Only as far into the tail as the samples reach.
                let max_nines = (r.wait.len() as f64).log10().min(X_NINES);
                let mut pts = String::new();
                let steps = 80;
                for i in 0..=steps {
                    let nines = max_nines * i as f64 / steps as f64;
                    let q = 1.0 - 10f64.powf(-nines);
                    let v = r.wait.value_at_quantile(q) as f64;
                    let _ = write!(pts, "{:.1},{:.1} ", px(nines), py(v));
                }
                let _ = writeln!(
                    s,
                    r#"<polyline fill="none" stroke="{}" stroke-width="{}" points="{}"/>"#,
                    color(w),
                    if w == Waiter::Hashlock { 2.4 } else { 1.6 },
                    pts.trim_end()
                );
                // The worst wait as a dot at the right edge of its line.
                let _ = writeln!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{}"><title>{}: worst {}</title></circle>"#,
                    px(max_nines),
                    py(r.wait.max() as f64),
                    color(w),
                    escape(&w.label()),
                    escape(&fmt_duration(Duration::from_nanos(r.wait.max())))
                );
            }
            if ri + 1 == ks.len() {
                let _ = writeln!(
                    s,
                    r##"<text x="{:.0}" y="{:.0}" text-anchor="middle" fill="#333">percentile of lock() calls</text>"##,
                    ox + 10.0 + pw / 2.0,
                    oy + TOP + ph + 30.0
                );
            }
        }
    }
    let _ = writeln!(s, "</svg>");
    s
}
