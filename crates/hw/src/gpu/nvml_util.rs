//! Helpers shared by the NVML probes: turning "not supported" into a `null`
//! field plus a note (never a failed call), raw field-value reads with a
//! scope id, and the NVLink remote device type.

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings as sys;

/// Collects why fields are null.
#[derive(Debug, Default)]
pub struct Notes {
    prefix: String,
    pub list: Vec<String>,
}

impl Notes {
    /// Notes whose lines start with `prefix` (e.g. `GPU 0: `).
    pub fn new(prefix: impl Into<String>) -> Notes {
        Notes {
            prefix: prefix.into(),
            list: Vec::new(),
        }
    }

    /// The value, or `None` with a note naming the field and the reason.
    pub fn take<T>(&mut self, field: &str, r: Result<T, NvmlError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.list
                    .push(format!("{}{field}: {}", self.prefix, describe(&e)));
                None
            }
        }
    }

    pub fn push(&mut self, text: impl AsRef<str>) {
        self.list.push(format!("{}{}", self.prefix, text.as_ref()));
    }
}

/// A reason a person can act on.
pub fn describe(e: &NvmlError) -> String {
    match e {
        NvmlError::NotSupported => "not supported by this GPU or driver".into(),
        NvmlError::NoPermission => "needs more privileges (run as root)".into(),
        NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_) => {
            "this driver's NVML does not have the function (driver too old)".into()
        }
        NvmlError::GpuLost => "the GPU has fallen off the bus (check dmesg for Xid errors)".into(),
        NvmlError::InvalidArg => "not available for this device or link".into(),
        NvmlError::NoData => "no data yet".into(),
        other => format!("NVML error: {other}"),
    }
}

/// One field value: its number or why there is none.
pub type FieldResult = Result<f64, String>;

/// Read NVML field values with scope ids (the wrapper fixes the scope at 0,
/// which is link 0 for per-link NVLink fields). Field ids must be outside the
/// 251-273 range that NVIDIA renumbered in driver 580.82.
pub fn field_values(nvml: &Nvml, device: &Device, requests: &[(u32, u32)]) -> Vec<FieldResult> {
    let sym = match nvml.lib().nvmlDeviceGetFieldValues.as_ref() {
        Ok(s) => s,
        Err(_) => {
            return requests
                .iter()
                .map(|_| Err("this driver's NVML has no field values".to_string()))
                .collect();
        }
    };
    let mut values: Vec<sys::nvmlFieldValue_t> = requests
        .iter()
        .map(|&(field, scope)| {
            // SAFETY: nvmlFieldValue_t is a plain C struct; all-zero is a valid value.
            let mut v: sys::nvmlFieldValue_t = unsafe { std::mem::zeroed() };
            v.fieldId = field;
            v.scopeId = scope;
            v
        })
        .collect();
    // SAFETY: the device handle is valid for the lifetime of `device`; `values`
    // holds `len` initialised entries that NVML fills in place.
    let ret = unsafe { sym(device.handle(), values.len() as i32, values.as_mut_ptr()) };
    if ret != sys::nvmlReturn_enum_NVML_SUCCESS {
        return requests
            .iter()
            .map(|_| Err(format!("nvmlDeviceGetFieldValues returned {ret}")))
            .collect();
    }
    values
        .iter()
        .map(|v| {
            if v.nvmlReturn != sys::nvmlReturn_enum_NVML_SUCCESS {
                return Err(match v.nvmlReturn {
                    sys::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED => {
                        "not supported by this GPU or driver".to_string()
                    }
                    sys::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT => {
                        "this driver does not know the field".to_string()
                    }
                    other => format!("NVML returned {other}"),
                });
            }
            // SAFETY: valueType says which union member NVML wrote.
            let n = unsafe {
                match v.valueType {
                    sys::nvmlValueType_enum_NVML_VALUE_TYPE_DOUBLE => v.value.dVal,
                    sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT => v.value.uiVal as f64,
                    sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG => v.value.ulVal as f64,
                    sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG => {
                        v.value.ullVal as f64
                    }
                    sys::nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG => {
                        v.value.sllVal as f64
                    }
                    sys::nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT => v.value.siVal as f64,
                    sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_SHORT => v.value.usVal as f64,
                    other => return Err(format!("unknown NVML value type {other}")),
                }
            };
            Ok(n)
        })
        .collect()
}

/// What sits at the other end of an NVLink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteType {
    Gpu,
    Switch,
    Npu,
    Unknown,
}

/// The remote device type of a link. nvml-wrapper 0.13's `remote_device_type`
/// passes a temporary to NVML and always answers Unknown, so call NVML here.
pub fn remote_device_type(nvml: &Nvml, device: &Device, link: u32) -> Option<RemoteType> {
    let sym = nvml
        .lib()
        .nvmlDeviceGetNvLinkRemoteDeviceType
        .as_ref()
        .ok()?;
    let mut t: sys::nvmlIntNvLinkDeviceType_t =
        sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
    // SAFETY: valid device handle; NVML writes one enum value.
    let ret = unsafe { sym(device.handle(), link, &mut t) };
    if ret != sys::nvmlReturn_enum_NVML_SUCCESS {
        return None;
    }
    Some(match t {
        sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_GPU => RemoteType::Gpu,
        sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_SWITCH => RemoteType::Switch,
        sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_IBMNPU => RemoteType::Npu,
        _ => RemoteType::Unknown,
    })
}

/// Round to one decimal.
pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Round to two decimals.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Decode throttle-reason bits into stable snake_case words.
pub fn throttle_words(r: ThrottleReasons) -> Vec<&'static str> {
    let table: &[(ThrottleReasons, &str)] = &[
        (ThrottleReasons::SW_POWER_CAP, "sw_power_cap"),
        (ThrottleReasons::HW_SLOWDOWN, "hw_slowdown"),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, "hw_thermal_slowdown"),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, "sw_thermal_slowdown"),
        (ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN, "hw_power_brake"),
        (ThrottleReasons::SYNC_BOOST, "sync_boost"),
        (
            ThrottleReasons::APPLICATIONS_CLOCKS_SETTING,
            "applications_clocks_setting",
        ),
        (
            ThrottleReasons::DISPLAY_CLOCK_SETTING,
            "display_clock_setting",
        ),
        (ThrottleReasons::GPU_IDLE, "gpu_idle"),
    ];
    table
        .iter()
        .filter(|(bit, _)| r.contains(*bit))
        .map(|(_, w)| *w)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_fields_become_notes() {
        let mut n = Notes::new("GPU 1: ");
        assert_eq!(
            n.take::<u32>("fan_speed_pct", Err(NvmlError::NotSupported)),
            None
        );
        assert_eq!(n.take("power_w", Ok(5)), Some(5));
        assert_eq!(n.take::<u32>("energy", Err(NvmlError::NoPermission)), None);
        assert_eq!(
            n.list,
            vec![
                "GPU 1: fan_speed_pct: not supported by this GPU or driver",
                "GPU 1: energy: needs more privileges (run as root)"
            ]
        );
        assert_eq!(round1(1.23456), 1.2);
        assert_eq!(round2(1.23456), 1.23);
    }
}
