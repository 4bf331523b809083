/**
 * Test-only: a cache of script variants produced from the production scripts (the clocked
 * and the decision-logging ones), built once per script.
 */
import type { LuaScript } from '../../src/algorithms/script.js';

/** `make`, memoized per production script. */
export function variantsOf(
  make: (script: LuaScript) => LuaScript,
): (script: LuaScript) => LuaScript {
  const variants = new Map<LuaScript, LuaScript>();
  return (script) => {
    let variant = variants.get(script);
    if (variant === undefined) {
      variant = make(script);
      variants.set(script, variant);
    }
    return variant;
  };
}
