// fasthttp peer: "Hello, World!" on GET /, and the baseline mix (/baseline11: the sum of the
// query parameters a and b and the integer body). Run with GOMAXPROCS=1 (bench/run's
// plaintext-coresN scenarios set it to N).
// Usage: fasthttp PORT
package main

import (
	"os"
	"strconv"

	"github.com/valyala/fasthttp"
)

func main() {
	port := "8080"
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	hello := []byte("Hello, World!")
	handler := func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case "/":
			ctx.SetContentType("text/plain")
			ctx.SetBody(hello)
		case "/baseline11":
			args := ctx.QueryArgs()
			a, _ := strconv.Atoi(string(args.Peek("a")))
			b, _ := strconv.Atoi(string(args.Peek("b")))
			body, _ := strconv.Atoi(string(ctx.PostBody()))
			ctx.SetContentType("text/plain")
			ctx.SetBodyString(strconv.Itoa(a + b + body))
		default:
			ctx.SetStatusCode(fasthttp.StatusNotFound)
		}
	}
	if err := fasthttp.ListenAndServe("127.0.0.1:"+port, handler); err != nil {
		panic(err)
	}
}
