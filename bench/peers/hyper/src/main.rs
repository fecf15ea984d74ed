// hyper peer: "Hello, World!" on GET /, and the baseline mix (/baseline11: the sum of the query
// parameters a and b and the integer body), on a single-threaded tokio runtime.
// Usage: hyper-peer PORT
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{body::Incoming, server::conn::http1, service::service_fn, Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use tokio::net::TcpListener;

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let body = match path.as_str() {
        "/" => Bytes::from_static(b"Hello, World!"),
        "/baseline11" => {
            let mut sum: i64 = 0;
            for pair in query.split('&') {
                if let Some((k, v)) = pair.split_once('=') {
                    if k == "a" || k == "b" {
                        sum += v.parse::<i64>().unwrap_or(0);
                    }
                }
            }
            let data = req.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            sum += std::str::from_utf8(&data).unwrap_or("0").trim().parse::<i64>().unwrap_or(0);
            Bytes::from(sum.to_string())
        }
        _ => {
            return Ok(Response::builder().status(404).body(Full::new(Bytes::new())).unwrap());
        }
    };
    Ok(Response::builder().header("content-type", "text/plain").body(Full::new(body)).unwrap())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let port = std::env::args().nth(1).unwrap_or_else(|| "8080".into());
    let listener = TcpListener::bind(format!("127.0.0.1:{port}")).await.unwrap();
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        stream.set_nodelay(true).ok();
        tokio::task::spawn(async move {
            let _ = http1::Builder::new()
                .pipeline_flush(true)
                .serve_connection(TokioIo::new(stream), service_fn(handle))
                .await;
        });
    }
}
