// Unit tests of the status page's formatting helpers (node --test), run by
// assets_test.go.
const test = require("node:test");
const assert = require("node:assert");
const { fmtBytes, fmtDuration, fmtRate, sparkline } = require("../assets/status.js");

test("fmtBytes", () => {
  assert.strictEqual(fmtBytes(0), "0 B");
  assert.strictEqual(fmtBytes(1023), "1023 B");
  assert.strictEqual(fmtBytes(1536), "1.5 KiB");
  assert.strictEqual(fmtBytes(3 * 1024 ** 3), "3.0 GiB");
});

test("fmtDuration", () => {
  assert.strictEqual(fmtDuration(42.9), "42s");
  assert.strictEqual(fmtDuration(61), "1m 1s");
  assert.strictEqual(fmtDuration(7322), "2h 2m");
  assert.strictEqual(fmtDuration(90000), "1d 1h");
  assert.strictEqual(fmtDuration(-5), "0s");
});

test("fmtRate", () => {
  assert.strictEqual(fmtRate(0), "0");
  assert.strictEqual(fmtRate(2.25), "2.3");
  assert.strictEqual(fmtRate(1500), "1.5k");
  assert.strictEqual(fmtRate(2500000), "2.5M");
});

test("sparkline scales the largest value to the top", () => {
  assert.strictEqual(sparkline([], 100, 10), "");
  assert.strictEqual(sparkline([0, 5, 10], 100, 10), "M0.0 10.0 L50.0 5.0 L100.0 0.0");
  assert.strictEqual(sparkline([0, 0], 100, 10), "M0.0 10.0 L100.0 10.0");
});
