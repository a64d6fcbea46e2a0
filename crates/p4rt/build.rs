//! Compile hotplane's own P4Runtime `.proto` files with protox (no `protoc` needed) and
//! generate the prost messages and the tonic service. The descriptor set is kept too: P4Info
//! text (what `p4c --p4runtime-files` writes and clients send) is parsed against it.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // p4config.proto and code.proto are imported by nothing, so they are named here.
    let fds = protox::compile(
        ["p4/v1/p4runtime.proto", "p4/tmp/p4config.proto", "google/rpc/code.proto"],
        ["proto"],
    )?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("p4runtime.fds"), prost::Message::encode_to_vec(&fds))?;
    // The service's server and client code only with the `server` feature: without it the
    // crate has no gRPC at all.
    let grpc = std::env::var_os("CARGO_FEATURE_SERVER").is_some();
    tonic_prost_build::configure().build_server(grpc).build_client(grpc).compile_fds(fds)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
