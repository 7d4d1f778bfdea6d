// A modal question with two answers. The native <dialog> keeps focus inside and closes on Escape.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';

export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  children: ComponentChildren;
  confirmLabel: string;
  dismissLabel: string;
  busy: boolean;
  onConfirm: () => void;
  onDismiss: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const dismiss = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    const d = dialog.current;
    if (!d) return;
    if (props.open && !d.open) {
      d.showModal();
      // The harmless answer has focus, so Enter does not end a job by accident.
      dismiss.current?.focus();
    } else if (!props.open && d.open) {
      d.close();
    }
  }, [props.open]);

  return (
    <dialog
      ref={dialog}
      class="dialog"
      role="dialog"
      aria-modal="true"
      aria-labelledby="confirm-title"
      aria-describedby="confirm-body"
      onClose={() => props.onDismiss()}
    >
      <h2 id="confirm-title">{props.title}</h2>
      <div id="confirm-body">{props.children}</div>
      <div class="dialog-actions">
        <button ref={dismiss} type="button" class="button" onClick={() => props.onDismiss()} disabled={props.busy}>
          {props.dismissLabel}
        </button>
        <button type="button" class="button danger" onClick={() => props.onConfirm()} disabled={props.busy} aria-busy={props.busy}>
          {props.confirmLabel}
        </button>
      </div>
    </dialog>
  );
}
