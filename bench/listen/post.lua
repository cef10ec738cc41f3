-- POSTs one signed ~400-byte track message; run.sh fills BODY and SIG.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["User-Agent"] = "evfwd-webhooks/bench"
wrk.headers["X-Signature"] = os.getenv("SIG")
wrk.body = os.getenv("BODY")

-- Print p99 in a form run.sh can read.
done = function(summary, latency, requests)
  io.write(string.format("RESULT requests=%d p99_us=%d errors=%d non2xx=%d\n",
    summary.requests, latency:percentile(99),
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status))
end
