#!/usr/bin/env ruby
# frozen_string_literal: true

# Sends six calls to `evfwd serve` the way Segment's analytics-ruby 2.4
# sends them, for compat-segment-node.sh: the gem is not installable where
# rubygems.org is out of reach, and what matters here is that a TLS stack
# other than Go's (Ruby's Net::HTTP on OpenSSL) gets through. On the wire,
# as 2.4 does it:
#
#   - HTTPS always: 2.4 sets use_ssl from `options[:ssl] ||= true`, so its
#     ssl: false is ignored; the system's CAs (SSL_CERT_FILE names a CA of
#     one's own); open timeout 4 s, read timeout 8 s;
#   - one persistent connection for every batch;
#   - POST /v1/import with Accept and Content-Type application/json,
#     User-Agent analytics-ruby/2.4.0, and Basic auth with the write key as
#     the user and no password;
#   - a body {"sentAt":..., "batch":[...]} whose messages carry
#     context.library {name: analytics-ruby, version: 2.4.0}, a UUIDv4
#     messageId, and timestamps with microseconds and the local offset
#     ("Z" only for a UTC time).
#
# Usage: compat-segment-ruby.rb URL WRITE_KEY [COMMAND]
#
# COMMAND, when given, runs between the two batches (the compat script
# reloads serve's certificate there); the second batch must still go over
# the connection the first one opened. Exits 0 when both batches got 200.

require 'json'
require 'net/http'
require 'openssl'
require 'securerandom'
require 'uri'

url, write_key, between = ARGV
abort 'usage: compat-segment-ruby.rb URL WRITE_KEY [COMMAND]' unless url && write_key
uri = URI(url)

def iso8601(time)
  time.strftime('%Y-%m-%dT%H:%M:%S.%6N') + (time.utc? ? 'Z' : time.strftime('%:z'))
end

def message(type, fields)
  {
    context: { library: { name: 'analytics-ruby', version: '2.4.0' } },
    messageId: SecureRandom.uuid,
    timestamp: iso8601(Time.new),
    type: type
  }.merge(fields)
end

batches = [
  [
    message('track', userId: 'u_rb', event: 'Order Completed', properties: { total: 129.95, items: [{ sku: 'a' }] }),
    message('identify', userId: 'u_rb', traits: { plan: 'pro' }),
    message('page', anonymousId: 'anon_rb', name: 'Home', properties: { path: '/' })
  ],
  [
    message('screen', userId: 'u_rb', name: 'Checkout', properties: {}),
    message('group', userId: 'u_rb', groupId: 'g1', traits: { name: 'Acme' }),
    message('alias', userId: 'u_rb', previousId: 'anon_rb')
  ]
]

http = Net::HTTP.new(uri.host, uri.port)
http.use_ssl = true
http.open_timeout = 4
http.read_timeout = 8
# 2.4 leaves Net::HTTP's 2 s: it would reconnect by itself after a slow
# COMMAND, and the check below is that the connection survives it.
http.keep_alive_timeout = 30
http.start

ok = true
first_serial = nil
batches.each_with_index do |batch, i|
  if i.positive? && between
    system(between) or abort "ruby: #{between.inspect} failed"
  end
  req = Net::HTTP::Post.new('/v1/import', 'Accept' => 'application/json',
                                          'Content-Type' => 'application/json',
                                          'User-Agent' => 'analytics-ruby/2.4.0')
  req.basic_auth(write_key, nil)
  res = http.request(req, JSON.generate(sentAt: iso8601(Time.now), batch: batch))
  serial = http.peer_cert.serial.to_s(16).upcase
  first_serial ||= serial
  types = batch.map { |m| m[:type] }.join(', ')
  puts "ruby: batch #{i + 1} (#{types}): #{res.code} #{res.body.strip}, certificate serial #{serial}"
  ok &&= res.code == '200'
  ok &&= serial == first_serial # the same connection throughout
end
http.finish
exit(ok ? 0 : 1)
