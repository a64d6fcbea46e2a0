//! Parse P4 files and report the first error of each (a front-end coverage check).
use hotplane_p4::diag::SourceMap;
use hotplane_p4::preprocess::FsLoader;

fn main() {
    let mut failed = 0;
    let files: Vec<String> = std::env::args().skip(1).collect();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable");
        let mut sources = SourceMap::default();
        match hotplane_p4::parse_program(&mut sources, &mut FsLoader::default(), f, &text, &[]) {
            Ok(p) => println!("ok   {f} ({} declarations)", p.decls.len()),
            Err(e) => {
                failed += 1;
                println!("FAIL {e}");
            }
        }
    }
    println!("{} of {} parsed", files.len() - failed, files.len());
}
