//! Figures as markdown: one section per requirement, with the failures
//! (violations, bugs found) listed under it.

#[derive(Debug, Default)]
pub struct Section {
    pub title: String,
    lines: Vec<String>,
    notes: Vec<String>,
    pub failures: Vec<String>,
}

impl Section {
    pub fn new(title: &str) -> Section {
        Section {
            title: title.to_string(),
            ..Section::default()
        }
    }

    pub fn line(&mut self, line: String) {
        self.lines.push(line);
    }

    /// Something worth knowing that is not a failure.
    pub fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    /// A violation or a bug: the run fails.
    pub fn fail(&mut self, failure: String) {
        self.failures.push(failure);
    }

    /// Records a check: passes silently, fails with `what`.
    pub fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.fail(what());
        }
    }

    pub fn render(&self) -> String {
        let mut s = format!("## {}\n\n", self.title);
        for l in &self.lines {
            s.push_str(l);
            s.push('\n');
        }
        if !self.notes.is_empty() {
            s.push('\n');
            for n in &self.notes {
                s.push_str(&format!("- note: {n}\n"));
            }
        }
        s.push('\n');
        if self.failures.is_empty() {
            s.push_str("**Result: PASS**\n");
        } else {
            s.push_str(&format!("**Result: FAIL ({})**\n\n", self.failures.len()));
            for f in &self.failures {
                s.push_str(&format!("- FAIL: {f}\n"));
            }
        }
        s
    }
}

/// 1234567 → "1,234,567".
pub fn fmt_int(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Median and maximum of a sample (0 when empty).
pub fn median_max(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[v.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands() {
        assert_eq!(fmt_int(0), "0");
        assert_eq!(fmt_int(999), "999");
        assert_eq!(fmt_int(1000), "1,000");
        assert_eq!(fmt_int(1234567), "1,234,567");
    }
}
