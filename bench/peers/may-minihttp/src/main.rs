// may_minihttp peer: "Hello, World!" on every request, on one worker thread.
// Usage: may-minihttp-peer PORT
use may_minihttp::{HttpServer, HttpService, Request, Response};
use std::io;

#[derive(Clone)]
struct Hello;

impl HttpService for Hello {
    fn call(&mut self, _req: Request, res: &mut Response) -> io::Result<()> {
        res.header("Content-Type: text/plain");
        res.body("Hello, World!");
        Ok(())
    }
}

fn main() {
    may::config().set_workers(1);
    let port = std::env::args().nth(1).unwrap_or_else(|| "8080".into());
    let server = HttpServer(Hello).start(format!("127.0.0.1:{port}")).unwrap();
    server.join().unwrap();
}
