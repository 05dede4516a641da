//! Serde for a number that may be NaN: JSON has no NaN, so it is written as `null` and read
//! back from `null` as NaN (`#[serde(with = "goodput_metrics::nan")]`).

use serde::{Deserialize, Deserializer, Serializer};

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

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct X {
        #[serde(with = "super")]
        v: f64,
    }

    #[test]
    fn nan_goes_to_null_and_back() {
        assert_eq!(serde_json::to_string(&X { v: f64::NAN }).unwrap(), r#"{"v":null}"#);
        assert!(serde_json::from_str::<X>(r#"{"v":null}"#).unwrap().v.is_nan());
        assert_eq!(serde_json::from_str::<X>(r#"{"v":1.5}"#).unwrap().v, 1.5);
    }
}
