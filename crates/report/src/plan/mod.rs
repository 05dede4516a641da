//! The planner's answers as text and pages (`goodput_sizing::plan` computes them): a plan's
//! table and page ([`answer`]), the interactivity curve's ([`curve`]), a fleet plan's
//! ([`fleet`]) and a projection's text ([`export`]); [`text`], [`json`] and [`html`] whatever the
//! mode.

pub mod answer;
pub mod curve;
pub mod export;
pub mod fleet;

use goodput_sizing::plan::Answer;

/// The answer as text, whatever its mode; `all`: a plan's table with the configurations that
/// do not fit too.
pub fn text(a: &Answer, all: bool) -> String {
    match a {
        Answer::Plan(p) => answer::text(p, all),
        Answer::Curve(c) => curve::text(c),
        Answer::Fleet(f) => fleet::text(f),
        Answer::Projection(p) => export::text(p),
    }
}

/// The answer as JSON (a projection's phases), and what it is called ("plan", "curve",
/// "fleet", "projection").
pub fn json(a: &Answer) -> serde_json::Result<(String, &'static str)> {
    Ok(match a {
        Answer::Plan(p) => (serde_json::to_string_pretty(p)?, "plan"),
        Answer::Curve(c) => (serde_json::to_string_pretty(c)?, "curve"),
        Answer::Fleet(f) => (serde_json::to_string_pretty(f)?, "fleet"),
        Answer::Projection(p) => (serde_json::to_string_pretty(&p.phases)?, "projection"),
    })
}

/// The answer's page; `None` for a projection, which has none.
pub fn html(a: &Answer) -> Option<Result<String, crate::ReportError>> {
    match a {
        Answer::Plan(p) => Some(Ok(answer::html(p))),
        Answer::Curve(c) => Some(curve::html(c)),
        Answer::Fleet(f) => Some(fleet::html(f)),
        Answer::Projection(_) => None,
    }
}
