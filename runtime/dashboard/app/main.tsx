// The dashboard's entry: styles, then the app mounted into the page's #app.
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { render } from 'preact';
import { App } from './app';

const root = document.getElementById('app');
if (root) render(<App />, root);
