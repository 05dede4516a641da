//! The planner's answers as text and pages (`goodput_sizing::plan` computes them): a plan's
//! table and page ([`answer`]), the interactivity curve's ([`curve`]), a fleet plan's
//! ([`fleet`]) and a projection's text ([`export`]).

pub mod answer;
pub mod curve;
pub mod export;
pub mod fleet;
