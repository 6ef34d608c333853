//! Builds the node agent's bind shim (`shim/bind_pod_ip.c`) as a shared object that pods'
//! processes load with LD_PRELOAD, and tells the crate where it is (`NODE_AGENT_BIND_SHIM`).

use std::env;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let source = "shim/bind_pod_ip.c";
    println!("cargo::rerun-if-changed={source}");
    let Some(out_dir) = env::var_os("OUT_DIR").map(PathBuf::from) else {
        eprintln!("cargo did not set OUT_DIR");
        return ExitCode::FAILURE;
    };
    let shared = out_dir.join("libbind_pod_ip.so");
    let compiler = cc::Build::new().pic(true).get_compiler();
    let status = compiler
        .to_command()
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-o"])
        .arg(&shared)
        .arg(source)
        .arg("-ldl")
        .status();
    match status {
        Ok(status) if status.success() => {
            println!("cargo::rustc-env=NODE_AGENT_BIND_SHIM={}", shared.display());
            ExitCode::SUCCESS
        }
        Ok(status) => {
            eprintln!(
                "building {source} into {} failed: {status}",
                shared.display()
            );
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("cannot run the C compiler for {source}: {error}");
            ExitCode::FAILURE
        }
    }
}
