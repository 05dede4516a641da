//! The `goodput` binary: a thin shell over `goodput-cli`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    if let Err(e) = goodput_cli::run() {
        // Exit quietly when stdout was closed early (`goodput models | head`).
        if e.chain()
            .any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
        {
            std::process::exit(0);
        }
        eprintln!("error: {e}");
        for cause in e.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
        std::process::exit(1);
    }
}
