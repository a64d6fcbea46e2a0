//! Compile P4 files (front-end and lowering, no code generation) and report each one's result:
//! `ok` or the first error. For checking a corpus of valid and invalid programs by hand.
use std::path::Path;

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    let mut refused = 0;
    for f in &files {
        match hotplane_p4::compile_file(Path::new(f), &[], &[]) {
            Ok(_) => println!("ok      {f}"),
            Err(e) => {
                refused += 1;
                println!("refused {f}: {}", e.to_string().lines().next().unwrap_or(""));
            }
        }
    }
    println!("{refused} of {} refused", files.len());
}
