module saker.bench/go-nethttp

go 1.21
