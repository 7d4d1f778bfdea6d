// What the cdk-nag acknowledgements of FloeCluster name: the exact resource strings cdk-nag reports
// (the same for an environment-agnostic stack and one bound to an account and region), and why each
// route of the HTTP API that a browser calls is left without IAM authorization.
import { Stack, Token } from 'aws-cdk-lib';

/**
 * The partition, region and account of `stack` as cdk-nag spells them in a finding: the value when the
 * stack is bound to an environment, the pseudo parameter in angle brackets (`<AWS::Region>`) when not.
 */
export function nagEnvironment(stack: Stack): { readonly partition: string; readonly region: string; readonly account: string } {
  const spell = (value: string, pseudo: string): string => (Token.isUnresolved(value) ? `<${pseudo}>` : value);
  return {
    partition: spell(stack.partition, 'AWS::Partition'),
    region: spell(stack.region, 'AWS::Region'),
    account: spell(stack.account, 'AWS::AccountId'),
  };
}

/**
 * Why a route a browser calls stays without IAM authorization (cdk-nag AwsSolutions-APIG4), by what it
 * serves; undefined for a route this does not know, which cdk-nag then reports until it has a reason.
 */
export function openRouteReason(path: string): string | undefined {
  if (path === '/' || path.startsWith('/assets/')) {
    return "The dashboard's page and its static files: a browser fetches them without a SigV4 signature, and they hold no data of any job.";
  }
  if (path === '/login' || path.startsWith('/login/') || path === '/logout') {
    return "The dashboard's sign-in and sign-out: a browser cannot sign with SigV4, so it exchanges a one-time link, which only an IAM-authorized call (floe dashboard) issues, for a revocable session; without such a link it gets none.";
  }
  if (path.startsWith('/ui/')) {
    return "The dashboard's own reads and cancel: a browser cannot sign with SigV4, so the function answers these routes only to a live dashboard session (opened through an IAM-issued one-time link) and refuses everything else.";
  }
  return undefined;
}
