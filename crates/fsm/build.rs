//! Builds the reference server written in C (c/epoll_server.c), which `ringio bench server`
//! measures beside the Rust models. It needs only a C compiler, as the rest of the build does.

fn main() {
    println!("cargo:rerun-if-changed=c/epoll_server.c");
    cc::Build::new()
        .file("c/epoll_server.c")
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true)
        .flag_if_supported("-std=gnu11")
        .compile("ringio_c_epoll");
}
