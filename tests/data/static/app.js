console.log("saker static test");
