//! Serde for a number that may be NaN: JSON has no NaN, so it is written as `null` and read
//! back from `null` as NaN (`#[serde(with = "goodput_metrics::nan::Nullable")]`). A type
//! rather than a module so that the schema derived for `summary.json` (schemars reads `with`
//! as a type) says the same: a number, or null.

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serializer};
use std::borrow::Cow;

/// A NaN-able `f64` as a JSON number or `null`.
pub struct Nullable;

impl Nullable {
    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        if x.is_finite() {
            s.serialize_f64(*x)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

impl JsonSchema for Nullable {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "NullableNumber".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        Option::<f64>::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct X {
        #[serde(with = "super::Nullable")]
        v: f64,
    }

    #[test]
    fn nan_goes_to_null_and_back() {
        assert_eq!(serde_json::to_string(&X { v: f64::NAN }).unwrap(), r#"{"v":null}"#);
        assert!(serde_json::from_str::<X>(r#"{"v":null}"#).unwrap().v.is_nan());
        assert_eq!(serde_json::from_str::<X>(r#"{"v":1.5}"#).unwrap().v, 1.5);
    }
}
