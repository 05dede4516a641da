//! `goodput run` on the terminal: the run's progress as an indicatif bar (the levels done of
//! those the sweep holds, the level running with its live line), and the finished run shown —
//! the tables and the conclusion on stdout (stderr with `--json`, which takes stdout for the
//! summary), where its files are, and why its exit status is not 0.

use super::spec::Shown;
use goodput_bench::progress::Progress;
use goodput_bench::run::live::Live;
use goodput_bench::run::Outcome;
use goodput_report::columns::Output;
use goodput_report::console as table;
use goodput_report::text::{console_width, wrap_to};
use std::io::IsTerminal;
use std::time::Duration;

/// The progress bar on stderr; indicatif hides it when stderr is not a terminal, and `quiet`
/// hides it always. Where it is hidden, lines go to stderr as they come (progress lines unless
/// `quiet`).
pub struct Bar {
    bar: indicatif::ProgressBar,
    quiet: bool,
}

impl Bar {
    /// A bar drawn from the sweep's first levels on (not while the model loads): until then,
    /// and always when `quiet`, lines go to stderr as they come.
    pub fn new(quiet: bool) -> Bar {
        let bar = indicatif::ProgressBar::with_draw_target(Some(0), indicatif::ProgressDrawTarget::hidden());
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] level {pos}/{len}: {msg}")
                .expect("a valid progress template"),
        );
        Bar { bar, quiet }
    }
}

/// A run that ends in an error leaves no half-drawn bar above it.
impl Drop for Bar {
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}

impl Progress for Bar {
    fn line(&self, line: &str, warning: bool) {
        let line = wrap_to(line, console_width(std::io::stderr().is_terminal()));
        if !self.bar.is_hidden() {
            self.bar.println(line);
        } else if warning || !self.quiet {
            eprintln!("{line}");
        }
    }

    fn levels(&self, total: usize) {
        if self.bar.is_hidden() && !self.quiet && self.bar.length() == Some(0) {
            // The sweep starts: the bar is drawn from here on (indicatif keeps it hidden where
            // stderr is not a terminal).
            self.bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            self.bar.enable_steady_tick(Duration::from_millis(120));
        }
        self.bar.set_length(total as u64);
    }

    fn level_started(&self, label: &str, live: Option<&Live>) {
        self.bar.set_message(label.to_string());
        if let Some(live) = live {
            self.bar.set_style(style(live.clone()));
        }
    }

    fn draws_live(&self) -> bool {
        !self.bar.is_hidden()
    }

    fn level_finished(&self) {
        self.bar.inc(1);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// The bar's style for a level: `msg` (the level's load) then its live line.
fn style(live: Live) -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] level {level}/{len}: {msg} │ {live}")
        .expect("a valid progress template")
        // The level running, where the bar's position counts the levels finished.
        .with_key("level", |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{}", (s.pos() + 1).min(s.len().unwrap_or(u64::MAX)));
        })
        .with_key("live", move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = w.write_str(&live.line());
        })
}

/// The finished run shown: its tables and conclusion (on stderr with `--json`, the summary
/// then on stdout), where its files are, and why its exit status is not 0. Returns the status.
/// Each block of a run's text on stdout, or on stderr where `--json` takes stdout.
pub fn print_blocks(blocks: &[String], json: bool) {
    let terminal = if json { std::io::stderr().is_terminal() } else { std::io::stdout().is_terminal() };
    for block in blocks.iter().map(|b| wrap_to(b, console_width(terminal))) {
        if json {
            eprintln!("{block}");
        } else {
            println!("{block}");
        }
    }
}

pub fn show(shown: &Shown, o: &Outcome) -> anyhow::Result<i32> {
    let (s, json) = (&o.summary, shown.json);
    if let Some(warning) = table::retry_storm(s) {
        eprintln!("{warning}");
    }
    let out = if shown.wide { Output::Console } else { Output::Compact };
    print_blocks(&table::run(s, shown.latency_columns.as_ref(), o.simulation.as_ref(), &o.conclusion, out), json);
    if json {
        println!("{}", serde_json::to_string(s)?);
    }
    if let Some(page) = &o.report {
        eprintln!("report in {}", page.display());
    }
    if let Some(dir) = &o.dir {
        eprintln!("results in {}", dir.display());
    }
    o.errors.iter().for_each(|e| eprintln!("{e}"));
    Ok(o.exit)
}
