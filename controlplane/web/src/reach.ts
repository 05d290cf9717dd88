// Why the receiver's console API gave this page no answer at all. A browser reports a
// receiver that is down and one that refuses this page's origin (no CORS answer) the
// same way, a TypeError with no response, and the fix differs: start the collector, or
// add the page's origin to its SVC_DASHBOARD_ORIGIN. A no-cors request tells them apart:
// it needs no CORS answer, so it resolves (opaquely) when something answers at the
// receiver's address and fails only when nothing does.

export interface Unreachable {
  code: 'origin_not_allowed' | 'network';
  message: string;
}

export async function explainUnreachable(base: string): Promise<Unreachable> {
  const origin = location.origin;
  let answered = false;
  try {
    await fetch(`${base}/console/v1/`, { mode: 'no-cors', cache: 'no-store', credentials: 'omit' });
    answered = true;
  } catch {
    // nothing answered there
  }
  if (answered) {
    return {
      code: 'origin_not_allowed',
      message: `The receiver at ${base} answers, but it does not allow this page's origin, ${origin}: add ${origin} to the collector's SVC_DASHBOARD_ORIGIN (comma-separated; the receiver's console.allowed_origins) and restart it, or open the dashboard at an address it allows.`,
    };
  }
  const mixed = location.protocol === 'https:' && base.startsWith('http:')
    ? ' This page is served over HTTPS, and a browser does not let it read an http:// address.' : '';
  return {
    code: 'network',
    message: `The receiver at ${base} could not be reached: check that the collector is running and that this browser can reach that address.${mixed}`,
  };
}
