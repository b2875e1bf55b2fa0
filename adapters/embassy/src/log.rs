//! Logging of the device: `defmt` behind the `defmt` feature, nothing otherwise.

#[cfg(feature = "defmt")]
macro_rules! log_debug { ($($t:tt)*) => { defmt::debug!($($t)*) }; }
#[cfg(not(feature = "defmt"))]
macro_rules! log_debug {
    ($($t:tt)*) => {{}};
}

pub(crate) use log_debug;
