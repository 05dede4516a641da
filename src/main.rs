//! The `goodput` binary: a thin shell over `goodput-cli`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(goodput_cli::main());
}
