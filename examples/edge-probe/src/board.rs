//! The NUCLEO-H743ZI: clocks, RMII Ethernet with the on-board LAN8742A, DHCP, and the probe.

use embassy_executor::Spawner;
use embassy_net::StackResources;
use embassy_stm32::eth::{Ethernet, GenericPhy, PacketQueue, Sma};
use embassy_stm32::peripherals::{ETH, ETH_SMA};
use embassy_stm32::rng::Rng;
use embassy_stm32::{Config, bind_interrupts, eth, peripherals, rng};
use static_cell::StaticCell;
use {defmt_rtt as _, panic_probe as _};

bind_interrupts!(struct Irqs {
    ETH => eth::InterruptHandler;
    RNG => rng::InterruptHandler<peripherals::RNG>;
});

type Device = Ethernet<'static, ETH, GenericPhy<Sma<'static, ETH_SMA>>>;

/// A locally administered unicast MAC (bit 1 of the first octet set).
const MAC_ADDR: [u8; 6] = [0x02, 0x56, 0x52, 0x46, 0x49, 0x01];

#[embassy_executor::task]
async fn net_task(mut runner: embassy_net::Runner<'static, Device>) -> ! {
    runner.run().await
}

#[embassy_executor::main]
async fn main(spawner: Spawner) -> ! {
    let mut config = Config::default();
    {
        use embassy_stm32::rcc::*;
        config.rcc.hsi = Some(HSIPrescaler::DIV1);
        config.rcc.csi = true;
        config.rcc.hsi48 = Some(Default::default()); // the RNG's clock
        config.rcc.pll1 = Some(Pll {
            source: PllSource::HSI,
            prediv: PllPreDiv::DIV4,
            mul: PllMul::MUL50,
            fracn: None,
            divp: Some(PllDiv::DIV2),
            divq: None,
            divr: None,
        });
        config.rcc.sys = Sysclk::PLL1_P; // 400 MHz
        config.rcc.ahb_pre = AHBPrescaler::DIV2; // 200 MHz
        config.rcc.apb1_pre = APBPrescaler::DIV2;
        config.rcc.apb2_pre = APBPrescaler::DIV2;
        config.rcc.apb3_pre = APBPrescaler::DIV2;
        config.rcc.apb4_pre = APBPrescaler::DIV2;
        config.rcc.voltage_scale = VoltageScale::Scale1;
    }
    let p = embassy_stm32::init(config);
    defmt::info!("edge-probe: boot");

    let mut rng = Rng::new(p.RNG, Irqs);
    let seed = rng.next_u64();

    static PACKETS: StaticCell<PacketQueue<4, 4>> = StaticCell::new();
    let device = Ethernet::new(
        PACKETS.init(PacketQueue::<4, 4>::new()),
        p.ETH,
        Irqs,
        p.PA1,  // REF_CLK
        p.PA7,  // CRS_DV
        p.PC4,  // RXD0
        p.PC5,  // RXD1
        p.PG13, // TXD0
        p.PB13, // TXD1
        p.PG11, // TX_EN
        MAC_ADDR,
        p.ETH_SMA,
        p.PA2, // MDIO
        p.PC1, // MDC
    );

    let net_config = embassy_net::Config::dhcpv4(Default::default());
    // The client's sockets, plus DHCP and DNS.
    static RESOURCES: StaticCell<StackResources<{ crate::probe::SOCKETS + 2 }>> = StaticCell::new();
    let (stack, runner) = embassy_net::new(
        device,
        net_config,
        RESOURCES.init(StackResources::new()),
        seed,
    );
    spawner.spawn(net_task(runner).expect("net task"));

    stack.wait_config_up().await;
    if let Some(c) = stack.config_v4() {
        defmt::info!("edge-probe: DHCP address {}", c.address);
    }
    #[cfg(feature = "size-baseline")]
    let outcome = crate::size::baseline(stack, &PROBE).await;
    #[cfg(feature = "size-parse")]
    let outcome = crate::size::parse_only(stack, &PROBE).await;
    #[cfg(not(any(feature = "size-baseline", feature = "size-parse", feature = "tls")))]
    let outcome = crate::probe::run(stack, &PROBE).await;
    // The TLS handshakes draw from the hardware RNG.
    #[cfg(all(
        feature = "tls",
        not(any(feature = "size-baseline", feature = "size-parse"))
    ))]
    let outcome = crate::probe::run(stack, &PROBE, rng).await;
    match outcome {
        Ok(good) => defmt::info!("edge-probe: done, {} probes answered", good),
        Err(why) => defmt::error!("edge-probe: {}", why),
    }
    loop {
        embassy_time::Timer::after_secs(3600).await;
    }
}

/// The probe, fixed at build time: `EDGE_PROBE_PRIMARY`, `EDGE_PROBE_FALLBACK`,
/// `EDGE_PROBE_COMMAND` and `EDGE_PROBE_TOKEN` (a bearer token, also redacted from all output).
static PROBE: crate::probe::ProbeConfig = crate::probe::ProbeConfig {
    slot: "kali",
    primary: match option_env!("EDGE_PROBE_PRIMARY") {
        Some(u) => u,
        None if cfg!(feature = "tls") => "https://mcp-tools.local:8443",
        None => "http://mcp-tools.local:8080",
    },
    fallback: option_env!("EDGE_PROBE_FALLBACK"),
    command: match option_env!("EDGE_PROBE_COMMAND") {
        Some(c) => c,
        None => "uname -a",
    },
    period_s: 60,
    count: None,
    run_id: "edge-probe",
    headers: match &AUTH {
        Some(h) => core::slice::from_ref(h),
        None => &[],
    },
    secrets: match &TOKEN {
        Some(t) => core::slice::from_ref(t),
        None => &[],
    },
    #[cfg(feature = "tls")]
    ca_der: include_bytes!(concat!(env!("OUT_DIR"), "/ca.der")),
};

const TOKEN_STR: Option<&str> = option_env!("EDGE_PROBE_TOKEN");
static TOKEN: Option<&[u8]> = match TOKEN_STR {
    Some(t) => Some(t.as_bytes()),
    None => None,
};
static AUTH: Option<(&str, &str)> = match option_env!("EDGE_PROBE_AUTHORIZATION") {
    Some(v) => Some(("authorization", v)),
    None => None,
};
