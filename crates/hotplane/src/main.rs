fn main() {
    println!("hotplane");
}
