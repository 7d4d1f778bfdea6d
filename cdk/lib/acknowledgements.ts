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
export function openRouteReason(method: string, path: string): string | undefined {
  const session = 'a live dashboard session, which only a one-time link issued through an IAM-authorized call (floe dashboard) opens and which can be revoked';
  switch (`${method} ${path}`) {
    case 'GET /':
    case 'GET /assets/{proxy+}':
      return "The dashboard's page and its static files: a browser fetches them without a SigV4 signature, and they hold no data of any job.";
    case 'GET /login':
      return 'The one-time link a browser opens (it cannot sign with SigV4): the function trades a code that an IAM-authorized call (floe dashboard) issued, once and within minutes, for a revocable session; any other code gets none.';
    case 'POST /login':
    case 'POST /ui/login':
      return "The dashboard's login form: on AWS the function refuses every secret here and answers how to sign in through an IAM-issued one-time link; it opens no session.";
    case 'POST /logout':
    case 'POST /ui/logout':
      return "Sign-out: the function only clears the browser's session cookie; it reads and changes nothing else.";
    case 'GET /ui/{proxy+}':
      return `The dashboard's reads (a browser cannot sign with SigV4): the function answers them only to ${session}, and refuses anything else.`;
    case 'PATCH /ui/jobs/{id}':
      return `The dashboard's cancel button (a browser cannot sign with SigV4): the function answers it only to ${session}; a session can do nothing else but read.`;
    default:
      return undefined;
  }
}
