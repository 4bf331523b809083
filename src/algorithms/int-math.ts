/**
 * Integer division on JavaScript numbers, exact for |values| ≤ 2^53: the same correction
 * the Lua scripts apply (`floor_div`), so script and in-memory twin agree bit for bit.
 */
export function floorDiv(a: number, b: number): number {
  let q = Math.floor(a / b);
  if (q * b > a) q--;
  if ((q + 1) * b <= a) q++;
  return q;
}

export function ceilDiv(a: number, b: number): number {
  let q = Math.floor(a / b);
  if (q * b < a) q++;
  if ((q - 1) * b >= a) q--;
  return q;
}
