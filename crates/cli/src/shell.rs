//! The command line's own files: shell completions (`goodput completions SHELL`, clap_complete)
//! and man pages (`goodput man --out DIR`, clap_mangen: `goodput.1` and one page per command,
//! `goodput-run.1`, as git's are), both from the same clap definition as `--help`, so they
//! never drift from it; and whether the console colors its output (`--color`, `NO_COLOR`).

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell. Install, e.g. for bash:
    /// `goodput completions bash > ~/.local/share/bash-completion/completions/goodput`; zsh: into
    /// a directory of `$fpath` as `_goodput`; fish: `~/.config/fish/completions/goodput.fish`.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write `goodput.1` and `goodput-COMMAND.1` for every command into this directory
    /// (created); without it, `goodput.1` on stdout. `scripts/man.sh` builds them.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
}

/// Prints `shell`'s completion script for `command` on stdout.
pub fn completions(a: CompletionsArgs, mut command: clap::Command) {
    clap_complete::generate(a.shell, &mut command, "goodput", &mut std::io::stdout());
}

/// Writes the man pages of `command` (see [`ManArgs`]); returns the files written.
pub fn man(a: ManArgs, command: clap::Command) -> Result<Vec<PathBuf>> {
    let command = command.version(env!("CARGO_PKG_VERSION"));
    let Some(dir) = a.out else {
        clap_mangen::Man::new(command).render(&mut std::io::stdout())?;
        return Ok(Vec::new());
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create it", dir.display()))?;
    let mut written = vec![page(&dir, "goodput", command.clone())?];
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("goodput-{}", sub.get_name());
        let sub = sub.clone().name(name.clone()).version(env!("CARGO_PKG_VERSION"));
        written.push(page(&dir, &name, sub)?);
    }
    Ok(written)
}

fn page(dir: &Path, name: &str, command: clap::Command) -> Result<PathBuf> {
    let path = dir.join(format!("{name}.1"));
    let mut bytes = Vec::new();
    clap_mangen::Man::new(command).render(&mut bytes)?;
    std::fs::write(&path, bytes).with_context(|| format!("{}: cannot write it", path.display()))?;
    Ok(path)
}

/// `--color`: when the console colors its output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless `NO_COLOR` is set (`CLICOLOR_FORCE` forces it).
    #[default]
    Auto,
    Always,
    Never,
}

/// Whether to color: `--color always|never` decide; `auto` colors a terminal (`tty`, and a
/// `TERM` other than `dumb`) unless `NO_COLOR` is set and not empty (no-color.org), and
/// anything when `CLICOLOR_FORCE` is set and not `0`.
pub fn color_on(when: ColorWhen, no_color: Option<&str>, force: Option<&str>, tty: bool, term: Option<&str>) -> bool {
    match when {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto if no_color.is_some_and(|v| !v.is_empty()) => false,
        ColorWhen::Auto if force.is_some_and(|v| !v.is_empty() && v != "0") => true,
        ColorWhen::Auto => tty && term != Some("dumb"),
    }
}

/// [`color_on`] for this process: its environment and whether the stream the tables go to is
/// a terminal (stdout, or stderr where `--json` took stdout for itself).
pub fn color_here(when: ColorWhen, tables_on_stderr: bool) -> bool {
    use std::io::IsTerminal;
    let var = |k| std::env::var(k).ok();
    let (no_color, force, term) = (var("NO_COLOR"), var("CLICOLOR_FORCE"), var("TERM"));
    let tty = if tables_on_stderr { std::io::stderr().is_terminal() } else { std::io::stdout().is_terminal() };
    color_on(when, no_color.as_deref(), force.as_deref(), tty, term.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn color_follows_the_flag_then_no_color_then_the_terminal() {
        use ColorWhen::*;
        assert!(color_on(Always, Some("1"), None, false, None));
        assert!(!color_on(Never, None, Some("1"), true, None));
        assert!(!color_on(Auto, Some("1"), None, true, Some("xterm")), "NO_COLOR wins over a terminal");
        assert!(color_on(Auto, Some(""), None, true, Some("xterm")), "an empty NO_COLOR is unset");
        assert!(color_on(Auto, None, Some("1"), false, None), "CLICOLOR_FORCE colors a pipe");
        assert!(!color_on(Auto, None, Some("0"), false, None));
        assert!(!color_on(Auto, None, None, false, Some("xterm")), "a pipe is plain");
        assert!(!color_on(Auto, None, None, true, Some("dumb")));
        assert!(color_on(Auto, None, None, true, None));
    }
}
